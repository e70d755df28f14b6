"""Helpers for module-library tests: drive modules through the real runtime loop with scripted doubles.

``run_modules`` wraps four module instances in a minimal harness object (what ``HarnessAgent`` needs:
``build()`` and ``prompts``) and runs one toy episode with a ``ScriptedBackbone`` TEST DOUBLE.
"""
import re
from types import SimpleNamespace

import pytest
import yaml

from jitlab.envs.toy import ToySuite
from jitlab.harness import seed_bank_dir
from jitlab.llm.scripted import ScriptedBackbone, listed_options
from jitlab.modules.basic import FullHistory, FullRegistry, NoPlanner, ReActAction
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode

REACT_PROMPTS = yaml.safe_load((seed_bank_dir() / "react" / "prompt.yaml").read_text())


def last_user(messages):
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def goal_solver(messages):
    """A scripted double for the toy suite: issues the first goal command not yet done ('You <cmd>.'),
    reading the goal and progress from the whole conversation."""
    text = "\n".join(m["content"] for m in messages)
    goal = re.findall(r"Goal: (.+?)\.", text)
    plan = goal[-1].split(" then ") if goal else []
    todo = [c for c in plan if f"You {c}." not in text]
    options = listed_options(last_user(messages))
    choice = todo[0] if todo else (options[0] if options else "look")
    return f"Thought: next is {choice}.\nAction: {choice}"


class Recorder:
    """Wraps a responder and records every prompt it saw."""

    def __init__(self, responder):
        self.responder, self.prompts = responder, []

    def __call__(self, messages):
        self.prompts.append(messages)
        return self.responder(messages)


def run_modules(memory=None, planner=None, policy=None, action=None, responder=goal_solver, task=0,
                prompts=None, max_steps=None, suite=None):
    suite = suite or ToySuite()
    spec = suite.tasks("dev")[task]
    modules = {"memory": memory or FullHistory(), "planner": planner or NoPlanner(),
               "policy": policy or FullRegistry(), "action": action or ReActAction()}
    harness = SimpleNamespace(build=lambda: modules, prompts=prompts or REACT_PROMPTS)
    recorder = Recorder(responder)
    llm = LLMHandle(ScriptedBackbone(recorder, name="test"), Budget())
    agent = HarnessAgent(harness, llm)
    steps = []
    result = run_episode(suite.make_env(spec), agent, llm, Budget(max_steps=max_steps), on_step=steps.append)
    return SimpleNamespace(result=result, agent=agent, llm=llm, steps=steps, prompts=recorder.prompts,
                           modules=modules, spec=spec)


@pytest.fixture
def run():
    return run_modules


class ToySolver:
    """A stateful scripted double for the toy suite: walks the goal's command list and remembers every
    command it has seen succeed ('You <command>.' in a prompt; every memory shows the current
    observation), so it works whatever the memory keeps of older steps."""

    def __init__(self):
        self.done = set()

    def __call__(self, messages):
        text = "\n".join(m["content"] for m in messages)
        goal = re.findall(r"Goal: (.+?)\.", text)
        plan = goal[-1].split(" then ") if goal else []
        self.done |= {c for c in plan if f"You {c}." in text}
        todo = [c for c in plan if c not in self.done]
        choice = todo[0] if todo else "look"
        return f"Thought: next is {choice}.\nAction: {choice}"


@pytest.fixture
def solver():
    return ToySolver()


@pytest.fixture
def make_ctx():
    """A bare Ctx (toy task 0, scripted double) for calling one module directly."""
    from jitlab.protocol import Ctx

    def make(responder=goal_solver, prompts=None, task=0):
        spec = ToySuite().tasks("dev")[task]
        recorder = Recorder(responder)
        llm = LLMHandle(ScriptedBackbone(recorder, name="test"), Budget())
        ctx = Ctx(llm=llm, task=spec, prompts=prompts or REACT_PROMPTS)
        ctx.recorder = recorder
        return ctx
    return make
