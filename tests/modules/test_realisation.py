"""Action realisation (jitlab/modules/realisation.py) on recorded TextWorld candidates."""
import yaml
from small_model_data import ACT, OBS, DoubleLLM

from jitlab.envs.base import TaskSpec
from jitlab.harness import seed_bank_dir
from jitlab.modules.realisation import RealisationHooks, nearest, realise
from jitlab.protocol import Context, Ctx, Decision, Directive, Observation, View

COOK = OBS["walkthrough:tw-cooking-l3-dev-00"]["steps"][0]
PROMPTS = yaml.safe_load((seed_bank_dir() / "small_model" / "likelihood" / "prompt.yaml").read_text())


def test_a_near_miss_maps_to_the_admissible_command_and_directions_never_swap():
    candidates = COOK["candidates"]
    assert realise("Action: Examine the cookbook.", candidates) == ("examine cookbook", "nearest")
    assert realise("'take knife from counter'", candidates) == ("take knife from counter", "exact")
    assert realise("I think we should cook", candidates) == ("", "refused")
    assert nearest("go west", ["go east", "go north"]) == ("", 0.0)


def _context(candidates):
    task = TaskSpec(id="t", suite="textworld", family="cooking", split="dev", description="Cook.", tools=[ACT])
    return Context(task=task, view=View("You are in a kitchen."), directive=Directive(), capabilities=[ACT],
                   observation=Observation(COOK["text"], candidates=candidates), step=1)


def test_the_hook_records_who_decided():
    hooks, candidates = RealisationHooks(), COOK["candidates"]
    ctx = Ctx(llm=DoubleLLM({"open fridge": 0.0}), task=_context(candidates).task, prompts=PROMPTS)
    exact = hooks.pre_action(ctx, _context(candidates), Decision("act", {"command": "look"}))
    assert exact.data == {"parsed": True, "decided_by": "model_reply"}
    raw = Decision("act", {"command": "x"}, data={"raw_action": "open the fridge"})
    mapped = hooks.pre_action(ctx, _context(candidates), raw)
    assert mapped.args["command"] == "open fridge" and mapped.data["decided_by"] == "mechanism"
    assert mapped.data["mechanism"] == "realisation:nearest" and mapped.data["parsed"] is False
    refused = hooks.pre_action(ctx, _context(candidates), Decision("act", {"command": "hmm, what now"}))
    assert refused.args["command"] == "open fridge" and refused.data["decided_by"] == "model_choice"
    assert refused.data["mechanism"] == "realisation:refused" and len(ctx.llm.score_calls) == 1


def test_without_candidates_or_a_text_tool_the_hook_keeps_the_decision():
    hooks = RealisationHooks()
    ctx = Ctx(llm=DoubleLLM({}), task=_context([]).task, prompts=PROMPTS)
    assert hooks.pre_action(ctx, _context([]), Decision("act", {"command": "dance"})) is None
    assert hooks.pre_action(ctx, _context(COOK["candidates"]), Decision("execute_sql", {"sql": "SELECT 1", "n": 2})) is None
