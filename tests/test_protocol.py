"""jitlab.protocol: the agents the episode loop drives (harness, sandboxed, the suites' oracles) declare ``Agent``."""
import importlib

import pytest

from jitlab.protocol import Action, Agent, CapabilityPolicy, Memory, Planner
from jitlab.runtime import HarnessAgent
from jitlab.sandbox.runner import SandboxedAgent


def test_harness_and_sandboxed_agents_declare_the_protocol():
    assert issubclass(HarnessAgent, Agent) and Agent in HarnessAgent.__mro__
    assert issubclass(SandboxedAgent, Agent) and Agent in SandboxedAgent.__mro__


@pytest.mark.parametrize("module, name", [("jitlab.envs.textworld", "WalkthroughOracle"),
                                          ("jitlab.envs.babyai", "BabyAIOracle"),
                                          ("jitlab.envs.dbbench", "DBBenchOracle")])
def test_oracles_declare_the_protocol(module, name):
    oracle = getattr(importlib.import_module(module), name)
    assert issubclass(oracle, Agent) and Agent in oracle.__mro__


def test_a_class_without_observe_is_not_an_agent():
    class Half:
        def begin(self, task, obs): ...
        def decide(self, step): ...
    assert not issubclass(Half, Agent)


def test_the_module_protocols_say_what_they_do():
    for proto in (Memory, Planner, CapabilityPolicy, Action, Agent):
        assert proto.__doc__ and len(proto.__doc__.split()) > 10, proto
