"""Toy suite: a tiny deterministic text game for fast tests (milliseconds, no dependencies).

Each task is a chain of rooms; the agent must issue the task's command sequence
(e.g. ``open door``, ``go east``, ``take coin``). Admissible commands are offered as candidates.
It exists to exercise runtime, records, resume and sandbox paths in tests; it is not a benchmark.
"""
from __future__ import annotations

import random

from jitlab.envs.base import Score, TaskSpec, check_choice
from jitlab.protocol import Capability, Observation

__all__ = ["ACT", "ToyEnv", "ToySuite"]

ACT = Capability("act", "Issue one text command to the game, e.g. 'go east'.",
                 {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
_VERBS = ["open door", "go east", "take coin", "go north", "unlock chest", "take key"]


class ToySuite:
    name = "toy"
    version = "1"  # the suite version (envs.base.suite_version): bump when tasks, actions or scoring change
    families = ["chain"]
    splits = ["dev", "test", "train"]   # train: teacher evidence (a pipeline's baselines), disjoint from dev and test
    reset_varies = False  # one fixed plan per task (jitlab/repeats.py)

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        offset = {"dev": 0, "test": 1000, "train": 2000}[split]
        specs = []
        for i in range(10):
            rng = random.Random(offset + i)
            plan = rng.sample(_VERBS, 2 + i % 3)
            specs.append(TaskSpec(
                id=f"toy-{split}-{i}", suite="toy", family="chain", split=split,
                description="A toy text game. Issue the commands that reach the goal; the game lists the "
                            "admissible commands each turn. Success: the goal is reached. Tool: act(command).",
                tools=[ACT], max_steps=8, data={"plan": plan}))
        return specs

    def make_env(self, spec: TaskSpec) -> ToyEnv:
        return ToyEnv(spec)


class ToyEnv:
    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self.plan = list(spec.data["plan"])
        self.done_steps = 0

    def _obs(self, text: str, reward: float = 0.0) -> Observation:
        done = self.done_steps == len(self.plan)
        candidates = sorted(set(_VERBS) | {"look"})
        return Observation(f"{text} Goal: {' then '.join(self.plan)}.", candidates=candidates, done=done, reward=reward)

    def reset(self, seed: int = 0) -> Observation:
        self.done_steps = 0
        return self._obs("You are in a small room.")

    def step(self, tool: str, args: dict) -> Observation:
        if tool != "act" or not isinstance(args.get("command"), str):
            return self._obs(f"Unknown tool {tool!r}: use act(command).")
        command = args["command"].strip().lower()
        if command == self.plan[self.done_steps]:
            self.done_steps += 1
            return self._obs(f"You {command}.", reward=1.0 / len(self.plan))
        return self._obs(f"Nothing happens after '{command}'.")

    def score(self) -> Score:
        return Score(success=self.done_steps == len(self.plan), reward=self.done_steps / len(self.plan))

    def close(self) -> None:
        pass
