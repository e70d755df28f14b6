"""Life-Harness interventions: mined from one backbone's records (a scripted TEST DOUBLE on the toy suite) into an
ordinary hooks overlay that runs, sandboxed, with another backbone unchanged."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.cli import main  # noqa: E402
from jitlab.engineer.interventions import intervention_patch, mine  # noqa: E402
from jitlab.engineer.loop import EngineerConfig, delta, run_batch  # noqa: E402
from jitlab.engineer.patches import apply_patch, check_patch  # noqa: E402
from jitlab.engineer.rules import rule_fields  # noqa: E402
from jitlab.envs.toy import ACT, ToySuite  # noqa: E402
from jitlab.llm.scripted import ScriptedBackbone  # noqa: E402
from jitlab.modules.hooks import InterventionHooks, normalise_command  # noqa: E402
from jitlab.protocol import Context, Ctx, Decision, Directive, Observation, View  # noqa: E402
from jitlab.runner import RunConfig, run  # noqa: E402
from jitlab.runtime import LLMHandle  # noqa: E402


def test_mined_patch_is_deterministic_and_records_its_evidence(tmp_path):
    out = run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-first", limit=4, out=str(tmp_path / "r"),
                        quiet=True))
    found = mine([out])
    assert found.fields["rerank"] == "untried" and found.fields["block_after"] == 1  # pick-first repeats itself
    assert found.evidence["backbones"] == ["scripted:pick-first"] and found.evidence["episodes"] == 4
    text = intervention_patch(found)
    assert check_patch(text) is None and text == intervention_patch(mine([out]))
    assert "scripted:pick-first" in text
    assert main(["engineer", "mine", str(out), "--out", str(tmp_path / "h.py")]) == 0
    assert (tmp_path / "h.py").read_text() == text


def test_without_score_the_choice_is_asked_by_chat_and_recorded():
    class NoScore:  # a TEST DOUBLE like a litellm backbone: chat only
        id = "scripted:no-score"

        def chat(self, messages, **params):
            return ScriptedBackbone(["2"]).chat(messages)
    hooks = InterventionHooks(rerank="always")
    task = ToySuite().tasks("dev")[0]
    ctx = Ctx(llm=LLMHandle(NoScore()), task=task)
    obs = Observation("A room.", candidates=["look", "open door", "go east"])
    hooks.on_init(ctx, obs)
    context = Context(task=task, view=View("A room."), directive=Directive(), capabilities=[ACT], observation=obs,
                      step=1)
    decision = hooks.pre_action(ctx, context, Decision("act", {"command": "look"}))
    assert decision.args == {"command": "open door"} and decision.data["hook"] == "rerank:chat"


def test_output_interceptor():
    assert normalise_command(' Action: "Open Door". ') == "open door"
    hooks = InterventionHooks(normalise=True)
    task = ToySuite().tasks("dev")[0]
    ctx = Ctx(llm=LLMHandle(ScriptedBackbone(["x"])), task=task)
    obs = Observation("A room.", candidates=["look", "open door"])
    hooks.on_init(ctx, obs)
    context = Context(task=task, view=View(""), directive=Directive(), capabilities=[ACT], observation=obs, step=1)
    decision = hooks.pre_action(ctx, context, Decision("act", {"command": "'Open door.'"}))
    assert decision.args == {"command": "open door"} and decision.data["hook"] == "normalise"


@requires_bwrap
def test_interventions_learned_on_one_backbone_apply_to_another(tmp_path):
    tasks = ToySuite().tasks("dev")[:4]
    learn = EngineerConfig(suite="toy", backbone="scripted:pick-first", out=str(tmp_path))
    base = run_batch(learn, "react", tasks, tmp_path / "learn-base")
    text = intervention_patch(mine([base["run_dir"]]))
    folder = apply_patch("react", text, tmp_path / "patched")
    on_learner = delta(base, run_batch(learn, folder, tasks, tmp_path / "learn-patched"))
    assert on_learner["delta"] > 0  # measured on the backbone it was mined from
    other = EngineerConfig(suite="toy", backbone="scripted:pick-last", out=str(tmp_path))
    base2, patched2 = run_batch(other, "react", tasks, tmp_path / "o-base"), run_batch(other, folder, tasks, tmp_path / "o-p")
    d = delta(base2, patched2)
    assert d["pairs"] == on_learner["pairs"] and d["delta"] is not None  # the same overlay, another backbone
    assert rule_fields(text) == {k: v for k, v in mine([base["run_dir"]]).fields.items() if k in rule_fields(text)}
