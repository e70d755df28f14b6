"""The harness protocol Π = (M, P, F, A), its lifecycle hooks and the data that flows between them.

A harness is the code around a frozen backbone. It is four modules:

    Memory            events -> a view of history          (v_t)
    Planner           view -> a local directive            (d_t)
    CapabilityPolicy  directive + view + registry -> tools (C_t)
    Action            assembled context -> next decision   (e_t)

plus four optional lifecycle hooks (Harness-R1) that any module may define as methods:
``on_init(ctx, obs)``, ``pre_decision(ctx, context) -> list[str]`` (hints),
``pre_action(ctx, context, decision) -> Decision | None`` (rewrite; ``None`` keeps it),
``post_feedback(ctx, decision, obs)``.

Modules never create a backbone client: they call ``ctx.llm.chat`` / ``ctx.llm.score`` on the
handle the runtime gives them, so every call is brokered, counted and cached.

The folder format (``memory.py``, ``planning.py``, ``action.py``, ``tool_policy.py``,
``prompt.yaml``, ``description.yaml``) is loaded by :mod:`jitlab.harness`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "HOOKS",
    "LLM",
    "Action",
    "Capability",
    "CapabilityPolicy",
    "Completion",
    "Context",
    "Ctx",
    "Decision",
    "Directive",
    "Event",
    "Memory",
    "Observation",
    "Planner",
    "View",
]

HOOKS = ("on_init", "pre_decision", "pre_action", "post_feedback")


@dataclass
class Capability:
    """A tool or skill the environment (or the harness) exposes: name, description, JSON-schema args."""
    name: str
    description: str
    args: dict = field(default_factory=dict)


@dataclass
class Observation:
    """What the environment returns from reset/step. ``candidates`` are admissible text actions, if known."""
    text: str
    candidates: list[str] = field(default_factory=list)
    done: bool = False
    reward: float = 0.0
    info: dict = field(default_factory=dict)


@dataclass
class Event:
    """One entry of history: kind is observation | action | tool_result | note."""
    kind: str
    content: str
    step: int = 0
    data: dict = field(default_factory=dict)


@dataclass
class View:
    """What memory shows the rest of the harness: rendered text plus the events it kept."""
    text: str
    events: list[Event] = field(default_factory=list)
    data: dict = field(default_factory=dict)


@dataclass
class Directive:
    """The planner's local instruction for the next decision (subgoal, plan step, checklist)."""
    text: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Decision:
    """The next action: a tool call (tool name + args). ``thought`` is kept for the record."""
    tool: str
    args: dict = field(default_factory=dict)
    thought: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Completion:
    """One backbone reply with its accounting."""
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    queue_s: float = 0.0                 # of latency_s: waiting for a shared model (not charged to the wall budget)
    compute_s: float | None = None       # of latency_s: the model's work (a batch's whole time); None: not split
    reused_tokens: int = 0               # prompt tokens taken from a prefix (KV) cache instead of prefilled


@dataclass
class Context:
    """Everything the Action module sees for one decision."""
    task: Any                      # jitlab.envs.TaskSpec
    view: View
    directive: Directive
    capabilities: list[Capability]
    observation: Observation
    hints: list[str] = field(default_factory=list)
    step: int = 0


@runtime_checkable
class LLM(Protocol):
    """The backbone handle a module is given."""
    def chat(self, messages: list[dict], **params) -> Completion: ...
    def score(self, messages: list[dict], candidates: list[str]) -> list[float]: ...


@dataclass
class Ctx:
    """Per-episode handle passed to every module call.

    ``llm``: brokered backbone; ``task``: the TaskSpec; ``prompts``: the harness's prompt.yaml;
    ``state``: free controller state shared by the modules; ``step``: current step index.
    """
    llm: Any
    task: Any
    prompts: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    step: int = 0
    notes: list[str] = field(default_factory=list)

    def log(self, message: str) -> None:
        self.notes.append(str(message))


@runtime_checkable
class Memory(Protocol):
    def reset(self, ctx: Ctx) -> None: ...
    def update(self, event: Event, ctx: Ctx) -> None: ...
    def view(self, ctx: Ctx) -> View: ...


@runtime_checkable
class Planner(Protocol):
    def reset(self, ctx: Ctx) -> None: ...
    def plan(self, view: View, ctx: Ctx) -> Directive: ...


@runtime_checkable
class CapabilityPolicy(Protocol):
    def reset(self, ctx: Ctx) -> None: ...
    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]: ...


@runtime_checkable
class Action(Protocol):
    def reset(self, ctx: Ctx) -> None: ...
    def act(self, context: Context, ctx: Ctx) -> Decision: ...
