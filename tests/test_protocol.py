"""jitlab.protocol: the agents the episode loop drives (harness, sandboxed, the suites' oracles) declare ``Agent``;
the slot table is defined once and the modules that name slots read it."""
import ast
import importlib
import inspect

import pytest

from jitlab import protocol
from jitlab.protocol import SLOTS, Action, Agent, CapabilityPolicy, Memory, Planner
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


SLOT_READERS = ("jitlab.harness", "jitlab.resolve", "jitlab.jit.generate.library", "jitlab.viz.anatomy")


@pytest.mark.parametrize("name", SLOT_READERS)
def test_slot_readers_import_the_one_table(name):
    """Each module that names the slots imports protocol.SLOTS and spells no slot's own file or class name itself
    (``tool_policy.py`` and ``CapabilityPolicy`` name only the F slot; the library's files share the other names)."""
    module = importlib.import_module(name)
    tree = ast.parse(inspect.getsource(module))
    assert any(isinstance(n, ast.ImportFrom) and n.module == "jitlab.protocol" and any(a.name == "SLOTS" for a in n.names)
               for n in ast.walk(tree)), f"{name} does not import jitlab.protocol.SLOTS"
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert not literals & {SLOTS["F"].file, SLOTS["F"].cls}, f"{name} spells the F slot instead of reading protocol.SLOTS"


def test_the_derived_tables_agree_with_the_slot_table():
    from jitlab import harness, resolve
    from jitlab.jit.generate import library
    from jitlab.viz import anatomy
    modules = [s for s in SLOTS.values() if not s.optional]
    assert list(SLOTS) == ["M", "P", "F", "A", "H"] and protocol.SLOTS is SLOTS
    assert harness.MODULE_FILES == {s.file: (s.cls, s.required) for s in modules}
    assert harness.OPTIONAL_FILES == {"hooks.py": ("Hooks", ())}
    assert {harness._KEY[s.file] for s in SLOTS.values()} == {"memory", "planner", "policy", "action", "hooks"}
    assert resolve._RESOLVED_FILES == ("memory.py", "planning.py", "tool_policy.py", "action.py", "hooks.py")
    assert library.ROLES == {s.letter: (s.file, s.cls, s.required, s.name) for s in modules}
    assert library.ROLES["F"] == ("tool_policy.py", "CapabilityPolicy", ("select",), "capability policy")
    assert {k: v[:3] for k, v in anatomy.SLOTS.items()} == {s.letter: (s.key, s.cls, s.file) for s in SLOTS.values()}
    assert SLOTS["M"].required == ("update", "view") and SLOTS["H"].required == ()
