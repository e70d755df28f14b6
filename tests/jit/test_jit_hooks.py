"""Issue 29 item 1, end to end: a streaming JIT run on the toy suite with a scripted backbone (a test double) chooses
a hooks option, renders it as hooks.py, validates it in the sandbox, runs it (a hook fires) and stores it in the bank."""
import json

from jitlab.jit.bank import Bank
from jitlab.jit.generate.library import NO_HOOKS
from jitlab.jit.inference import JITConfig, run_jit
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
    traces = frames["steps"]["trace"].map(json.loads)
    assert any(t.get("hook") for t in traces)                                     # and it ran: a hook fired
