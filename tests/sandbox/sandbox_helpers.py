"""Helpers for the sandbox tests (imported by test_*.py): a tiny harness in a temp folder, small limits, a toy episode.

The tiny harness is a test fixture, not a seed: memory keeps the last events, no planner, the full
registry, and an action that asks the backbone once and issues 'Action: <command>'.
"""
import os
import textwrap
from pathlib import Path

import pytest

from jitlab.envs.toy import ToySuite
from jitlab.llm.scripted import ScriptedBackbone, get_scripted
from jitlab.runtime import Budget, LLMHandle, run_episode
from jitlab.sandbox import SandboxConfig, SandboxedAgent, probe

MEMORY = '''
from jitlab.protocol import View


class Memory:
    def reset(self, ctx):
        self.events = []

    def update(self, event, ctx):
        self.events.append(event)

    def view(self, ctx):
        return View(text="\\n".join(e.content for e in self.events[-4:]), events=list(self.events[-4:]))
'''
PLANNING = '''
from jitlab.protocol import Directive


class Planner:
    def reset(self, ctx):
        pass

    def plan(self, view, ctx):
        return Directive("")
'''
POLICY = '''
class CapabilityPolicy:
    def reset(self, ctx):
        pass

    def select(self, directive, view, registry, ctx):
        return list(registry)
'''
ACTION = '''
from jitlab.protocol import Decision
{top}

class Action:
    def reset(self, ctx):
        pass

    def act(self, context, ctx):
{body}
'''
DEFAULT_ACT = '''
reply = ctx.llm.chat([{"role": "user", "content": context.view.text + "\\n" +
                       "\\n".join("- " + c for c in context.observation.candidates)}])
return Decision("act", {"command": reply.text.split("Action:")[-1].strip()}, thought=reply.text)
'''


def action(body: str = DEFAULT_ACT, top: str = "") -> str:
    """action.py text whose ``act`` runs ``body`` (statements; must return a Decision)."""
    return ACTION.format(top=top, body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8))


def write_harness(folder: Path, **files: str) -> Path:
    """Write the tiny harness to ``folder``; keyword args replace files (``action_py=...``)."""
    folder.mkdir(parents=True, exist_ok=True)
    content = {"memory.py": MEMORY, "planning.py": PLANNING, "tool_policy.py": POLICY, "action.py": action(),
               "prompt.yaml": "system: tiny\n", "description.yaml": "name: tiny\nlineage: [test]\n"}
    content.update({name.replace("_py", ".py").replace("_yaml", ".yaml"): text for name, text in files.items()})
    for name, text in content.items():
        (folder / name).write_text(text)
    return folder


def small_config(**overrides) -> SandboxConfig:
    """Small limits so every adversarial test ends within seconds (wall 5 s leaves room for a loaded machine)."""
    values = dict(wall_s=5.0, cpu_s=1, memory_mb=512, output_limit_bytes=1 << 20, start_timeout_s=30)
    values.update(overrides)
    return SandboxConfig(**values)


def solver(spec):
    """A scripted TEST DOUBLE that knows the toy plan: it answers the next planned command."""
    plan, calls = spec.data["plan"], []

    def responder(messages):
        calls.append(1)
        return f"Thought: next.\nAction: {plan[min(len(calls) - 1, len(plan) - 1)]}"
    return ScriptedBackbone(responder, name="toy-solver")


def episode(folder, config=None, backbone=None, task: int = 0, budget: Budget | None = None):
    """One toy episode with a SandboxedAgent: (EpisodeResult, agent, step records, llm handle)."""
    spec = ToySuite().tasks()[task]
    budget = budget or Budget()
    llm = LLMHandle(backbone or get_scripted("pick-first"), budget)
    agent = SandboxedAgent(folder, llm, config or small_config())
    records = []
    try:
        result = run_episode(ToySuite().make_env(spec), agent, llm, budget, on_step=records.append)
    finally:
        agent.close()
    assert descendants() == [], "a sandboxed process outlived its episode"
    return result, agent, records, llm


requires_bwrap = pytest.mark.skipif(not probe()[0], reason=f"bubblewrap sandbox unavailable: {probe()[1]}")


def descendants() -> list[int]:
    """Live host processes below this test process (a sandbox that is gone leaves none)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], {os.getpid()}
    while frontier:
        children = {pid for pid, ppid in parents.items() if ppid in frontier}
        found += sorted(children)
        frontier = children
    return found
