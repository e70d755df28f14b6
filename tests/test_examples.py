"""examples/: the newcomer's first read runs, and uses only the protocol (no module library)."""
import ast
import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hello_harness_runs_on_the_toy_suite(capsys, tmp_path):
    """jitlab.run takes the Harness object: the example wires no loop (no run_episode, no LLMHandle of its own)."""
    results = _load("hello_harness").main(["--limit", "2", "--out", str(tmp_path / "hello")])
    assert len(results) == 2 and all(r.status == "ok" and r.steps >= 1 for r in results)
    assert "toy-dev-0: ok" in capsys.readouterr().out
    from jitlab.store import load
    frames = load(tmp_path / "hello")
    assert set(frames["episodes"]["harness"]) == {"hello"} and frames["config"]["harness"].iloc[0] == "hello"
    assert set(frames["episodes"]["isolation"]) == {"in-process (a Harness object)"}
    text = (EXAMPLES / "hello_harness.py").read_text()
    assert not [name for name in ("run_episode", "LLMHandle", "HarnessAgent", "get_suite") if name in text]
    again = _load("hello_harness").main(["--limit", "2", "--out", str(tmp_path / "hello")])   # resumes: nothing reruns
    assert [r.id for r in again] == [r.id for r in results]
    import jitlab
    from jitlab.errors import ConfigError
    from jitlab.harness import Harness
    hello = _load("hello_harness")
    harness = Harness.from_modules(memory=hello.Memory, planner=hello.Planner,
                                   policy=hello.CapabilityPolicy, action=hello.Action)
    with pytest.raises(ConfigError, match="no folder to sandbox"):
        jitlab.run(jitlab.RunConfig(suite="toy", isolation="sandbox", out=str(tmp_path / "x")), harness=harness)


def test_hello_harness_is_written_from_scratch():
    tree = ast.parse((EXAMPLES / "hello_harness.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "jitlab.protocol" in modules and not any(m.startswith("jitlab.modules") for m in modules)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert classes == {"Memory", "Planner", "CapabilityPolicy", "Action"}
    assert all(not n.bases for n in tree.body if isinstance(n, ast.ClassDef))     # nothing inherited
    assert "SimpleNamespace" not in (EXAMPLES / "hello_harness.py").read_text()  # a real Harness, not a stand-in
    assert {"jitlab.harness"} <= modules


def test_from_modules_checks_each_slot_and_builds_fresh_instances():
    import pytest

    from jitlab.errors import HarnessError
    from jitlab.harness import Harness
    hello = _load("hello_harness")
    classes = dict(memory=hello.Memory, planner=hello.Planner, policy=hello.CapabilityPolicy, action=hello.Action)
    harness = Harness.from_modules(**classes, name="hello")
    first, second = harness.build(), harness.build()
    assert set(first) == {"memory", "planner", "policy", "action"} and first["memory"] is not second["memory"]
    assert harness.name == "hello" and len(harness.sha) == 64
    assert Harness.from_modules(**classes).sha == harness.sha
    with pytest.raises(HarnessError, match="lacks method.*plan") as err:
        Harness.from_modules(**{**classes, "planner": hello.Memory})
    assert err.value.file == "planning.py"
    with pytest.raises(HarnessError, match="must be a class.*not an instance"):
        Harness.from_modules(**{**classes, "action": hello.Action()})


def test_the_package_root_re_exports_the_starting_names_lazily():
    """``import jitlab`` gives run, RunConfig, run_jit, JITConfig and load, importing their modules only when used."""
    import subprocess
    import sys
    code = ("import sys, jitlab; assert 'jitlab.runner' not in sys.modules and 'jitlab.jit.inference' not in sys.modules;"
            "from jitlab.runner import RunConfig, run; from jitlab.jit.inference import JITConfig, run_jit;"
            "from jitlab.store import load;"
            "assert (jitlab.run, jitlab.RunConfig, jitlab.run_jit, jitlab.JITConfig, jitlab.load) == "
            "(run, RunConfig, run_jit, JITConfig, load); assert set(jitlab.__all__) >= {'run', 'load'}")
    subprocess.run([sys.executable, "-c", code], check=True)
    import pytest

    import jitlab
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = jitlab.no_such_name
