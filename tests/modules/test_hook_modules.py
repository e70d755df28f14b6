"""RuleHooks (jitlab/modules/hooks.py): each rule on its own, driven directly with a scripted TEST DOUBLE backbone."""
from jitlab.envs.base import TaskSpec
from jitlab.envs.toy import ACT
from jitlab.llm.scripted import ScriptedBackbone
from jitlab.modules.hooks import RuleHooks
from jitlab.protocol import Capability, Context, Ctx, Decision, Directive, Observation, View
from jitlab.runtime import LLMHandle

TASK = TaskSpec(id="t", suite="toy", family="chain", split="dev", description="Open the door, then go east.",
                tools=[ACT], max_steps=5)
CANDIDATES = ["go east", "look", "open door"]


def _setup(hooks, text="You are in a room."):
    llm = LLMHandle(ScriptedBackbone(["unused"], name="double"))
    ctx = Ctx(llm=llm, task=TASK)
    hooks.on_init(ctx, Observation(text, candidates=CANDIDATES))
    return ctx


def _context(step, text="You are in a room.", view="open door please", caps=(ACT,)):
    return Context(task=TASK, view=View(view), directive=Directive(), capabilities=list(caps),
                   observation=Observation(text, candidates=CANDIDATES), step=step)


def _act(command):
    return Decision("act", {"command": command})


def test_block_after_replaces_an_action_that_failed_in_the_same_state_by_likelihood():
    hooks = RuleHooks(block_after=2)
    ctx = _setup(hooks)
    for step in (1, 2):
        ctx.step = step
        assert hooks.pre_action(ctx, _context(step), _act("go east")).args["command"] == "go east"
        hooks.post_feedback(ctx, _act("go east"), Observation("Nothing happens.", candidates=CANDIDATES))
    ctx.step = 3
    replaced = hooks.pre_action(ctx, _context(3), _act("go east"))
    # the scripted double's score is word overlap with the view ("open door please"): 'open door' wins
    assert replaced.args["command"] == "open door" and replaced.data["hook"] == "block_after:score"


def test_off_by_default_and_a_rewarded_action_is_not_a_failure():
    hooks = RuleHooks()
    ctx = _setup(hooks)
    for step in range(1, 4):
        assert hooks.pre_action(ctx, _context(step), _act("go east")).args["command"] == "go east"
        hooks.post_feedback(ctx, _act("go east"), Observation("Nothing happens.", candidates=CANDIDATES))
    assert hooks.pre_decision(ctx, _context(4)) == []
    blocking = RuleHooks(block_after=1)
    ctx = _setup(blocking)
    blocking.pre_action(ctx, _context(1), _act("open door"))
    blocking.post_feedback(ctx, _act("open door"), Observation("You open the door.", reward=0.5))
    assert blocking.pre_action(ctx, _context(2, "You open the door."), _act("go east")).args["command"] == "go east"


def test_correct_invalid_loop_hint_and_commit():
    hooks = RuleHooks(correct_invalid=True)
    ctx = _setup(hooks)
    assert hooks.pre_action(ctx, _context(1), _act("dance wildly")).args["command"] in CANDIDATES
    looping = RuleHooks(loop_after=2)
    ctx = _setup(looping)
    looping.pre_action(ctx, _context(1), _act("look"))
    looping.post_feedback(ctx, _act("look"), Observation("You are in a room.", candidates=CANDIDATES))
    assert "circles" in looping.pre_decision(ctx, _context(2))[0]
    assert looping.pre_action(ctx, _context(2), _act("look")).args["command"] != "look"
    hinting = RuleHooks(hint_after=2)
    ctx = _setup(hinting)
    assert hinting.pre_decision(ctx, _context(2)) == []
    assert hinting.pre_decision(ctx, _context(3)) == ["Remember the goal: Open the door, then go east."]
    commit = Capability("commit_answer", "Commit the final answer.", {})
    committing = RuleHooks(commit_margin=1)
    ctx = _setup(committing, "42\n(1 row)")
    sql = Decision("execute_sql", {"sql": "SELECT 1"})
    assert committing.pre_action(ctx, _context(4, caps=(commit,)), sql).tool == "execute_sql"
    forced = committing.pre_action(ctx, _context(5, caps=(commit,)), sql)
    assert (forced.tool, forced.args) == ("commit_answer", {"answer": "42"})
