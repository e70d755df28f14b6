"""Per-step compliance (jitlab/compliance.py): the record of one step, a hook that overrides the model, the run's
shares by step index in summary.json, the export and ``jitlab show --compliance``."""
import json

from jitlab.cli import main
from jitlab.compliance import compliance_by_step, step_record, steps_compliance
from jitlab.envs.base import TaskSpec
from jitlab.export import export_runs
from jitlab.protocol import Capability, Decision, Observation
from jitlab.runner import RunConfig, run
from jitlab.runtime import HarnessAgent
from jitlab.store import load

ACT = Capability("act", "a command", {"properties": {"command": {"type": "string"}}})
TASK = TaskSpec("t", "toy", "chain", "dev", "a task", tools=[ACT])
OBS = Observation("a room", candidates=["take coin", "go east"])


def test_a_parsed_reply_naming_an_admissible_command():
    d = Decision("act", {"command": "take coin"}, "", {"decided_by": "model_reply", "parsed": True,
                                                       "raw_action": "Take coin."})
    assert step_record(d, OBS, TASK, chat_calls=1, score_calls=0) == {
        "decided_by": "model_reply", "mechanism": None, "parsed": True, "admissible": True, "realised": False,
        "hooked": False}


def test_realisation_that_mapped_an_inadmissible_reply_and_the_defaults():
    d = Decision("act", {"command": "take coin"}, "", {"raw_action": "grab the shiny coin"})
    rec = step_record(d, OBS, TASK, chat_calls=1, score_calls=0)
    assert rec["admissible"] is False and rec["realised"] is True
    assert rec["decided_by"] == "model_reply" and rec["parsed"] is None  # the action did not say: unknown
    assert step_record(d, OBS, TASK, 0, 2)["decided_by"] == "model_choice"
    none = step_record(Decision("act", {"command": "go east"}), OBS, TASK, 0, 0)
    assert none["decided_by"] == "mechanism" and none["mechanism"] == "no backbone call"


def test_admissible_on_a_multi_tool_task_is_a_known_tool():
    sql = Capability("execute_sql", "", {"properties": {"sql": {"type": "string"}, "limit": {"type": "integer"}}})
    task = TaskSpec("d", "dbbench", "other", "dev", "", tools=[sql])
    assert step_record(Decision("execute_sql", {"sql": "SELECT 1"}), Observation("ok"), task, 1, 0)["admissible"]
    assert not step_record(Decision("drop_table", {"x": 1}), Observation("ok"), task, 1, 0)["admissible"]


class _Mod:  # TEST DOUBLES of the four modules: fixed view, directive, capabilities and decision
    def update(self, event, ctx):
        pass

    def view(self, ctx):
        from jitlab.protocol import View
        return View("v")

    def plan(self, view, ctx):
        from jitlab.protocol import Directive
        return Directive("")

    def select(self, directive, view, caps, ctx):
        return caps

    def act(self, context, ctx):
        return Decision("act", {"command": "go east"}, "", {"decided_by": "model_reply", "parsed": True})


class _Override:  # a TEST DOUBLE hook that replaces every decision
    def pre_action(self, ctx, context, decision):
        return Decision("act", {"command": "take coin"}, decision.thought, {**decision.data, "hook": "always"})


class _Keep:  # a TEST DOUBLE hook that returns the decision unchanged
    def pre_action(self, ctx, context, decision):
        return decision


class _Harness:
    prompts: dict = {}

    def __init__(self, hook):
        self.hook = hook

    def build(self):
        mod = _Mod()
        return {"memory": mod, "planner": mod, "policy": mod, "action": mod, "hooks": self.hook}


def _decide(hook):
    agent = HarnessAgent(_Harness(hook), llm=None)
    agent.begin(TASK, OBS)
    return agent.decide(1)


def test_a_hook_that_changes_the_decision_marks_it_mechanism_and_one_that_keeps_it_does_not():
    changed = _decide(_Override())
    assert changed.data["decided_by"] == "mechanism" and changed.data["hooked"] is True
    assert changed.data["mechanism"] == "_Override:always"
    kept = _decide(_Keep())
    assert kept.data["decided_by"] == "model_reply" and "hooked" not in kept.data


def test_a_run_records_compliance_per_step_and_summarises_it(tmp_path, capsys):
    good = run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-hash", limit=2, out=str(tmp_path / "g"),
                         quiet=True))
    bad = run(RunConfig(suite="toy", harness="react", backbone="scripted:reply:I am not sure", limit=2, max_steps=3,
                        out=str(tmp_path / "b"), quiet=True))
    g, b = (json.loads((d / "summary.json").read_text())["compliance"] for d in (good, bad))
    assert g["parsed"] == 1.0 and g["admissible"] == 1.0 and g["decided_by_model_reply"] == 1.0
    assert b["parsed"] == 0.0 and b["admissible"] == 0.0 and b["realised"] == 1.0 and b["n_steps"] == 6
    assert [row["step"] for row in b["by_step"]] == [1, 2, 3] and all(row["n_steps"] == 2 for row in b["by_step"])
    exported = export_runs([bad], tmp_path / "x")[0]  # the export keeps the records, so the shares read back
    frames = load(exported)
    assert compliance_by_step(frames["steps"], frames["episodes"]).to_dict(orient="records") == b["by_step"]
    assert main(["show", str(exported), "--compliance"]) == 0
    out = capsys.readouterr().out
    assert "compliance in" in out and "parsed=0.00" in out and "admissible=0.00" in out


def test_only_the_steps_of_finished_episodes_count_when_episodes_are_given():
    import pandas as pd
    rec = json.dumps(step_record(Decision("act", {"command": "go east"}), OBS, TASK, 1, 0))
    steps = pd.DataFrame({"episode_id": [1, 2, 2], "step": [1, 1, 2], "compliance": [rec, rec, rec]})
    episodes = pd.DataFrame({"id": [1, 2], "final": [True, False]})  # episode 2: an interrupted attempt
    assert compliance_by_step(steps)["n_steps"].tolist() == [2, 1]
    assert compliance_by_step(steps, episodes)["n_steps"].tolist() == [1]


def test_the_likelihood_choices_lead_is_kept_per_step_and_shown(tmp_path, capsys):
    scored = Decision("act", {"command": "go east"}, "", {"decided_by": "model_choice", "choice": {"gap": 0.4213}})
    assert step_record(scored, OBS, TASK, 0, 1)["gap"] == 0.421
    assert "gap" not in step_record(Decision("act", {"command": "go east"}), OBS, TASK, 1, 0)  # none reported
    assert "gap" not in step_record(Decision("act", {"command": "go east"}, "", {"choice": {"gap": float("nan")}}),
                                    OBS, TASK, 0, 1)
    out = run(RunConfig(suite="toy", harness="small_model/explorer", backbone="scripted:uniform", limit=2,
                        out=str(tmp_path / "e"), quiet=True))
    frames = load(out)
    gaps = steps_compliance(frames["steps"], frames["episodes"])["gap"]
    assert gaps.notna().any() and (gaps.dropna() == 0).all()  # uniform scores: the backbone never leads
    assert main(["show", str(out), "--compliance"]) == 0
    assert "backbone's lead over the runner-up" in capsys.readouterr().out
