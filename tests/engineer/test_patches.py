"""Patches: static checks, the overlay (base untouched, one identity), and sandboxed validation with typed
diagnostics for a patch that reaches for the scorer or writes outside the sandbox (real bubblewrap)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.engineer.patches import NOOP_PATCH, apply_patch, check_patch, patch_identity, validate_patch  # noqa: E402
from jitlab.engineer.rules import rule_patch  # noqa: E402
from jitlab.envs.toy import ToySuite  # noqa: E402
from jitlab.errors import ConfigError  # noqa: E402
from jitlab.harness import harness_sha, read_files, resolve  # noqa: E402
from jitlab.jit.repair import RepairConfig  # noqa: E402
from jitlab.llm.scripted import get_scripted  # noqa: E402
from jitlab.runtime import Budget, LLMHandle  # noqa: E402


def _hooks(body: str, head: str = "") -> str:
    return f"{head}\n\nclass Hooks:\n{body}\n"


@pytest.mark.parametrize("text, kind", [
    (NOOP_PATCH, None),
    (rule_patch({"block_after": 2}), None),
    (_hooks("    def pre_action(self, ctx, context, decision):\n        return None\n"
            "    def _helper(self):\n        pass"), None),
    ("class Hooks:\n    def on_init(self, ctx, obs)\n        pass\n", "parse_error"),
    ("x = 1\n", "interface_mismatch"),
    (_hooks("    def act(self, context, ctx):\n        pass"), "interface_mismatch"),
    (_hooks("    def pre_action(self, ctx, context):\n        pass"), "interface_mismatch"),
    (_hooks("    def on_init(self, ctx, obs, *more):\n        pass"), "interface_mismatch"),
    (_hooks("    pass", "from jitlab.envs.toy import ToyEnv"), "import_error"),
    (_hooks("    pass", "import jitlab.runner"), "import_error"),
    (_hooks("    pass", "import numpy"), "import_error"),
    (_hooks("    pass", "from . import memory"), "import_error"),
])
def test_check_patch(text, kind):
    problem = check_patch(text)
    assert (problem or {}).get("kind") == kind, problem
    if problem:
        assert problem["file"] == "hooks.py" and problem["message"]


def test_overlay_leaves_the_base_alone_and_has_one_identity(tmp_path):
    base = resolve("react")
    before = read_files(base)
    folder = apply_patch("react", NOOP_PATCH, tmp_path / "p")
    assert read_files(base) == before and "hooks.py" not in before
    assert read_files(folder) == {**before, "hooks.py": NOOP_PATCH}
    sha = patch_identity("react", NOOP_PATCH)
    assert sha == harness_sha(read_files(folder)) != harness_sha(before)
    assert patch_identity("react", rule_patch({"block_after": 1})) != sha
    assert patch_identity("resum", NOOP_PATCH) != sha  # same patch, other base: another identity
    with pytest.raises(ConfigError, match="already has a hooks.py"):
        apply_patch(folder, NOOP_PATCH, tmp_path / "q")


def _validate(tmp_path, text):
    suite = ToySuite()
    llm = LLMHandle(get_scripted("pick-first"), Budget(max_tokens=6000))
    return validate_patch("react", text, suite, suite.tasks("dev")[1], llm, tmp_path / "v", RepairConfig(smoke_steps=3))


@requires_bwrap
def test_valid_patches_pass_the_sandboxed_smoke_episode(tmp_path):
    for text in (NOOP_PATCH, rule_patch({"block_after": 1, "correct_invalid": True, "loop_after": 3, "hint_after": 2})):
        v = _validate(tmp_path, text)
        assert v.ok, v.diagnostic
        assert v.smoke["steps"] == 3 and v.isolation == "bwrap+seccomp+rlimits"


READ_SCORER = '''import importlib


class Hooks:
    def on_init(self, ctx, obs):
        toy = importlib.import_module("jitlab.envs." + "toy")   # the suite's scorer lives there
        ctx.state["plan"] = toy.ToySuite().tasks("dev")[0].data["plan"]
'''
TASK_DATA = '''class Hooks:
    def on_init(self, ctx, obs):
        ctx.state["plan"] = ctx.task.data["plan"]   # the answer stays in the parent: data is empty here
'''
WRITE_OUT = '''class Hooks:
    def post_feedback(self, ctx, decision, obs):
        with open({path!r}, "w") as fh:
            fh.write("escaped")
'''


@requires_bwrap
@pytest.mark.parametrize("name", ["read_scorer", "task_data", "write_harness_folder", "write_host"])
def test_a_patch_that_reaches_out_gets_a_typed_diagnostic(tmp_path, name):
    host = tmp_path / "escape.txt"
    text = {"read_scorer": READ_SCORER, "task_data": TASK_DATA,
            "write_harness_folder": WRITE_OUT.format(path="/sandbox/harness/hooks.py"),
            "write_host": WRITE_OUT.format(path=str(host))}[name]
    assert check_patch(text) is None  # nothing a static check can see: the sandbox stops it
    v = _validate(tmp_path, text)
    assert not v.ok and v.stage == "smoke"
    assert v.diagnostic["kind"] == "runtime_error" and v.diagnostic["file"] == "hooks.py"
    # the host path is not there inside the sandbox (its /tmp is a private tmpfs; the rest is read-only)
    expected = {"read_scorer": ("No module named 'jitlab.envs.toy'",), "task_data": ("KeyError: 'plan'",),
                "write_harness_folder": ("Read-only file system",),
                "write_host": ("No such file or directory", "Read-only file system")}[name]
    assert any(e in v.diagnostic["message"] for e in expected), v.diagnostic
    assert not host.exists()
    assert "hooks.py" not in read_files(resolve("react"))


def test_cli_apply_writes_the_patched_folder_and_refuses_a_bad_patch(tmp_path, capsys):
    from jitlab.cli import main
    (tmp_path / "good.py").write_text(NOOP_PATCH)
    assert main(["engineer", "apply", "react", str(tmp_path / "good.py"), "--out", str(tmp_path / "p")]) == 0
    assert read_files(tmp_path / "p")["hooks.py"] == NOOP_PATCH
    assert patch_identity("react", NOOP_PATCH)[:12] in capsys.readouterr().out
    (tmp_path / "bad.py").write_text(_hooks("    def act(self, context, ctx):\n        pass"))
    assert main(["engineer", "apply", "react", str(tmp_path / "bad.py"), "--out", str(tmp_path / "q")]) == 2
    assert "interface_mismatch" in capsys.readouterr().err and not (tmp_path / "q").exists()
