"""Issue 29 item 1, end to end: a streaming JIT run on the toy suite with a scripted backbone (a test double) chooses
a hooks option, renders it as hooks.py, validates it in the sandbox, stores it in the bank, and the
rendered hooks work when loaded back (they fix a mangled command)."""
import json

from jitlab.envs import get_suite
from jitlab.harness import load_harness
from jitlab.jit.bank import Bank
from jitlab.jit.generate.library import NO_HOOKS
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.llm.base import get_backbone
from jitlab.protocol import Context, Ctx, Decision, Directive, Observation, View
from jitlab.sandbox import probe
from jitlab.store import load


def test_streaming_jit_chooses_renders_validates_runs_and_banks_hooks(tmp_path):
    out = run_jit(JITConfig(suite="toy", backbone="scripted:pick-hash", limit=2, retrieval="bm25", cache=False,
                            out=str(tmp_path / "r"), smoke_steps=2, quiet=True, allow_unisolated=not probe()[0],
                            mode="streaming"))
    frames = load(out)
    eps = frames["episodes"]
    final = eps[eps["final"]]
    bank = Bank(out / "bank.sqlite")
    for extra, sha in zip(final["extra"].map(json.loads), final["harness_sha"]):
        hooks = extra["modules"]["H"]
        assert hooks and hooks != NO_HOOKS                                        # chosen
        assert (out / extra["harness_dir"] / "hooks.py").read_text().count("class Hooks(")  # rendered
        chosen = [c for c in extra["jit"]["candidates"] if c["sha"] == sha]
        assert chosen and chosen[0]["valid"] and chosen[0]["stage"] == "passed"  # validated in the sandbox
        assert chosen[0]["modules"]["H"] == hooks
        assert "hooks.py" in bank.files(sha)                                      # stored in the bank
        assert "  H: " in bank.files(sha)["description.yaml"]
    # and the rendered hooks work: the chosen harness's hooks (loaded from its folder, built as a run builds them)
    # fix a mangled command, whether or not this run's action ever sent one (LikelihoodAction sends admissible ones)
    extra = json.loads(final["extra"].iloc[0])
    hooks = load_harness(out / extra["harness_dir"]).build()["hooks"]
    task = get_suite("toy").tasks("test")[0]
    obs = Observation("You are in a room.", candidates=["go east", "look"])
    ctx = Ctx(llm=get_backbone("scripted:pick-first"), task=task)
    hooks.on_init(ctx, obs)
    context = Context(task=task, view=View(obs.text), directive=Directive(), capabilities=list(task.tools),
                      observation=obs, step=1)
    fixed = hooks.pre_action(ctx, context, Decision("act", {"command": "Action: 'Go East'."}))
    assert fixed.args == {"command": "go east"} and fixed.data.get("hook")
