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

One level up, an ``Agent`` (``begin / decide / observe``) is what the episode loop drives: a harness's
four modules in this process (``jitlab.runtime.HarnessAgent``), the same in a sandboxed child
(``jitlab.sandbox.SandboxedAgent``), or a suite's privileged oracle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "HOOKS",
    "LLM",
    "Action",
    "Agent",
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
    "SLOTS",
    "Slot",
    "View",
]

HOOKS = ("on_init", "pre_decision", "pre_action", "post_feedback")


@dataclass(frozen=True)
class Slot:
    """One slot of a harness folder: the file that fills it and the class that file defines. jitlab.harness (loading),
    jitlab.resolve (resolved files), jitlab.jit.generate.library (roles) and jitlab.viz.anatomy read this table."""
    letter: str     # M, P, F, A (the papers' names), H for the optional hooks
    key: str        # key of the module instance in Harness.classes / Harness.build()
    name: str       # human name, in prompts and messages
    cls: str        # class the file must define
    file: str       # file in a harness folder
    methods: dict = field(default_factory=dict)  # protocol method -> its input parameters (reset included)
    optional: bool = False  # a harness may leave the file out

    @property
    def required(self) -> tuple[str, ...]:
        """Methods a loaded class must have (reset is optional)."""
        return tuple(m for m in self.methods if m != "reset")


# letter -> slot, in folder order; the four module slots, then the optional hooks
SLOTS = {s.letter: s for s in (
    Slot("M", "memory", "memory", "Memory", "memory.py", {"reset": (), "update": ("event",), "view": ()}),
    Slot("P", "planner", "planner", "Planner", "planning.py", {"reset": (), "plan": ("view",)}),
    Slot("F", "policy", "capability policy", "CapabilityPolicy", "tool_policy.py",
         {"reset": (), "select": ("directive", "view", "registry")}),
    Slot("A", "action", "action", "Action", "action.py", {"reset": (), "act": ("context",)}),
    Slot("H", "hooks", "hooks", "Hooks", "hooks.py", {"reset": ()}, optional=True),
)}


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
    reused_tokens: int | None = 0        # prompt tokens taken from a prefix (KV) cache instead of prefilled (None:
                                         # not measured, a score call counted in words: jitlab.runtime.LLMHandle.score)


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
    """M: keeps the episode's history and shows the other modules a view of it. ``update`` receives every
    event (the observation after reset, each decision, each tool result); ``view`` returns what the
    planner and the action see now (v_t), e.g. the full history, a summary plus recent turns, or notes."""
    def reset(self, ctx: Ctx) -> None: ...
    def update(self, event: Event, ctx: Ctx) -> None: ...
    def view(self, ctx: Ctx) -> View: ...


@runtime_checkable
class Planner(Protocol):
    """P: turns the view into a local directive d_t for this step (a subgoal, the current plan step, a
    checklist), or an empty Directive when the harness does not plan."""
    def reset(self, ctx: Ctx) -> None: ...
    def plan(self, view: View, ctx: Ctx) -> Directive: ...


@runtime_checkable
class CapabilityPolicy(Protocol):
    """F: picks the tools exposed at this step (C_t) from the suite's registry, given the directive and the
    view; it may narrow the registry (tool search, a completion gate) but never invents a tool."""
    def reset(self, ctx: Ctx) -> None: ...
    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]: ...


@runtime_checkable
class Action(Protocol):
    """A: from the assembled context (view, directive, exposed tools, hints) to the next decision e_t: one
    tool call with its arguments, usually by calling ``ctx.llm`` and parsing the reply."""
    def reset(self, ctx: Ctx) -> None: ...
    def act(self, context: Context, ctx: Ctx) -> Decision: ...


@runtime_checkable
class Agent(Protocol):
    """What :func:`jitlab.runtime.run_episode` drives, one episode at a time: ``begin`` with the task and the
    first observation, then per step ``decide`` (the next Decision) and ``observe`` (the environment's reply).
    Implementations: ``HarnessAgent`` (a harness in this process), ``SandboxedAgent`` (in a child process; it
    also has ``close``, and ``limit_wall(clock)`` to bound its child by the episode's wall budget) and the
    suites' oracles (privileged sanity checks)."""
    def begin(self, task: Any, obs: Observation) -> None: ...
    def decide(self, step: int) -> Decision: ...
    def observe(self, decision: Decision, obs: Observation, step: int) -> None: ...
