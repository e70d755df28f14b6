"""The mechanisms of JIT-Agent's six case-study harnesses (its Figures 7, 8, A.1-A.4) as library modules.

    from jitlab.modules.case_studies import EvidenceGatedPolicy
    class CapabilityPolicy(EvidenceGatedPolicy): pass      # in a harness folder's tool_policy.py

The case-study folders (``jitlab/seeds/case_studies/<name>/``, resolved into ``seed_bank/case_studies/``)
compose these; the compose and plan generators list them like every other library module, so JIT can
combine them with the seed modules. By design:

- Palimpsest (Fig. 7): ``BoundedDAGPlanner`` (a DAG whose ready set is at most ``max_width`` wide and
  whose dependency chains are at most ``max_depth`` long), ``BoundedDAGExecutor`` (one proposal per ready
  node, width-bounded, deeper nodes skipped), ``ArtifactMemory`` (reusable results + reasoning state).
- Trapdoor (Fig. 8): ``OrchestratorAction`` intercepts the ``delegate`` call and runs a bounded sub-agent
  (``SubAgent``), then extracts facts from its report and trajectory into ``FactGraphMemory``;
  ``DelegationInterceptPolicy`` hides ``delegate`` once the delegation budget is spent.
- Origami (Fig. A.1): ``SubtaskTreePlanner`` (subtasks with their own contexts, then aggregation) and
  ``HierarchicalFoldMemory`` (its fold step replaces only the active working context by an artifact).
- Turnstile (Fig. A.2): ``SpecChecklistPlanner`` (specification + evidence checklist),
  ``EvidenceChecklistMemory`` (fills the checklist's buckets from results, with source ids) and
  ``EvidenceGatedPolicy`` (the final-answer tool stays hidden until the checklist is complete).
- Gearbox (Fig. A.3): ``PhaseRegisterAction`` is the sole writer of ``ctx.state['phase']``;
  ``PhaseToolPolicy`` and ``PhaseAwareMemory`` read it to switch the exposed tools and the memory's schema.
- Pegboard (Fig. A.4): ``EvidenceMatrixMemory`` (candidate x clue cells, each with a source id) and
  ``MatrixCoveragePlanner`` (coverage drives the directive and the switch to verification, read by
  ``EvidenceGatedPolicy(state_key="verify")``).

``ctx.state`` keys: ``phase``/``phase_log`` (Gearbox), ``checklist``/``checklist_complete`` (Turnstile),
``clues``/``matrix_candidates``/``matrix``/``coverage``/``verify`` (Pegboard), ``subtask`` (Origami),
``facts_inbox``/``max_delegations`` (Trapdoor; plus CoordinatorAction's ``delegations``/``subagent``),
``dag_rounds`` (Palimpsest).

Caveats: evidence matching is lexical (token overlap), facts are read from prose by patterns ("X is Y",
"X: Y"), not by a model; on suites whose only tool is ``act`` (TextWorld, BabyAI) the gated policies
have nothing to hide. Every gate opens in the last ``open_before_end`` steps, so an unfinished checklist
cannot keep a harness from answering at all.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from jitlab.modules.action import CoordinatorAction, DAGParallelAction, step_messages
from jitlab.modules.basic import ReActAction, history_text, parse_react, to_decision
from jitlab.modules.planning import DAGPlanner
from jitlab.modules.policy import DELEGATE, AgentDelegation, SubAgent
from jitlab.modules.text import clip, is_failure, list_items, meaningful, parse_subtasks, render_prompt, sections, tokens, user
from jitlab.protocol import Capability, Context, Ctx, Decision, Directive, Event, Observation, View

__all__ = ["ArtifactMemory", "BoundedDAGExecutor", "BoundedDAGPlanner", "DelegationInterceptPolicy",
           "EvidenceChecklistMemory", "EvidenceGatedPolicy", "EvidenceMatrixMemory", "FactGraphMemory",
           "HierarchicalFoldMemory", "MatrixCoveragePlanner", "OrchestratorAction", "PhaseAwareMemory",
           "PhaseRegisterAction", "PhaseToolPolicy", "SpecChecklistPlanner", "SubtaskTreePlanner", "extract_facts"]

_ANSWER_TOOLS = "commit_answer,answer,finish,submit"


def _names(csv: str) -> list[str]:
    return [n.strip() for n in str(csv).split(",") if n.strip()]


def _informative(event: Event) -> bool:
    """A result worth keeping as evidence: an observation after an action that did not fail."""
    return event.kind in ("observation", "tool_result") and event.step > 0 and not is_failure(event.content)


def _overlap(a: str, b: str) -> int:
    return len(set(tokens(a)) & set(tokens(b)))


def _section_list(text: str, label: str, labels: tuple[str, ...], max_items: int) -> list[str]:
    """The list items under ``label:`` up to the next of ``labels`` (``sections`` joins lines, losing the list)."""
    heads = list(re.finditer(r"^[\s>*#\-]*\**\s*(" + "|".join(labels) + r")\w*\**\s*[:：]", str(text), re.I | re.M))
    for i, m in enumerate(heads):
        if m.group(1).lower() == label:
            return list_items(text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)], max_items)
    return []


def _last_seen(events: list[Event]) -> str:
    return next((e.content for e in reversed(events) if e.kind in ("observation", "tool_result")), "")


# ------------------------------------------------------------------------------------- gated tool policy

@dataclass
class EvidenceGatedPolicy:
    """F (evidence-gated final answer; Turnstile, Pegboard): the final-answer tools stay hidden until the evidence is complete
    (``ctx.state[state_key]`` is true, set by an evidence memory or planner); everything is exposed in
    the last ``open_before_end`` steps of the task's budget."""
    gated: str = field(default=_ANSWER_TOOLS, metadata={"help": "comma-separated tools hidden until the evidence is complete"})
    state_key: str = field(default="checklist_complete", metadata={"help": "ctx.state flag that opens the gate"})
    open_before_end: int = field(default=2, metadata={"help": "expose everything in the last n steps of the budget"})

    def reset(self, ctx: Ctx) -> None:
        self.opened_at: int | None = None

    def is_open(self, ctx: Ctx) -> bool:
        return bool(ctx.state.get(self.state_key)) or ctx.step >= max(1, ctx.task.max_steps - self.open_before_end)

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        if self.is_open(ctx):
            self.opened_at = ctx.step if self.opened_at is None else self.opened_at
            return list(registry)
        hidden = set(_names(self.gated))
        return [c for c in registry if c.name not in hidden] or list(registry)


# ------------------------------------------------------------------------------------- Turnstile: checklist

@dataclass
class SpecChecklistPlanner:
    """P (Turnstile spec + checklist): one call writes a specification of the answer and a checklist of the evidence it
    needs (``ctx.state['checklist']``); the directive names the open buckets, then tells the agent to
    commit once the evidence memory has filled them all."""
    max_items: int = field(default=3, metadata={"help": "evidence buckets in the checklist"})
    max_new_tokens: int = field(default=96, metadata={"help": "tokens for the specification call"})
    fallback: str = field(default="the data the task is about;the result that answers it",
                          metadata={"help": "';'-separated checklist used when the reply lists no items"})

    def reset(self, ctx: Ctx) -> None:
        self.spec, self.written = "", False

    def write(self, view: View, ctx: Ctx) -> None:
        prompt = render_prompt(ctx.prompts, "spec_checklist", task=ctx.task.public(), view=view.text[-800:],
                               max_items=self.max_items)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        parts = sections(reply, ("specification", "checklist"))
        self.spec = clip(parts.get("specification", ""), 160)
        items = _section_list(reply, "checklist", ("specification", "checklist"), self.max_items) or \
            list_items(reply, self.max_items)
        items = items or [i.strip() for i in self.fallback.split(";") if i.strip()][: self.max_items]
        ctx.state["checklist"] = [{"item": clip(i, 80), "done": False, "evidence": "", "source": ""} for i in items]
        ctx.state["checklist_complete"] = False
        self.written = True

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if not self.written:
            self.write(view, ctx)
        checklist = ctx.state.get("checklist") or []
        todo = [c["item"] for c in checklist if not c["done"]]
        text = f"Specification: {self.spec}\n" if self.spec else ""
        text += ("Evidence still needed: " + "; ".join(todo)) if todo else \
            "The evidence checklist is complete: give the final answer."
        return Directive(text, {"checklist": [dict(c) for c in checklist], "complete": not todo})


@dataclass
class EvidenceChecklistMemory:
    """M (Turnstile evidence checklist): the transcript plus a data store of evidence buckets (``ctx.state['checklist']``):
    each informative result fills the open bucket it matches best (else the first open one), with its
    source id (``s<step>``); ``ctx.state['checklist_complete']`` turns true when every bucket is filled."""
    max_chars: int = field(default=1800, metadata={"help": "characters of transcript shown (most recent kept)"})
    fallback: str = field(default="the result that answers the task",
                          metadata={"help": "';'-separated checklist used when no planner wrote one"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if not _informative(event):
            return
        checklist = ctx.state.setdefault("checklist", [{"item": i.strip(), "done": False, "evidence": "", "source": ""}
                                                       for i in self.fallback.split(";") if i.strip()])
        open_items = [c for c in checklist if not c["done"]]
        if open_items:
            action = next((e.content for e in reversed(self.events) if e.kind == "action"), "")
            best = max(open_items, key=lambda c: _overlap(c["item"], action + " " + event.content))
            best.update(done=True, evidence=clip(event.content, 120), source=f"s{event.step}")
        ctx.state["checklist_complete"] = bool(checklist) and all(c["done"] for c in checklist)

    def view(self, ctx: Ctx) -> View:
        checklist = ctx.state.get("checklist") or []
        lines = [f"[{'x' if c['done'] else ' '}] {c['item']}" + (f" <- {c['source']}: {c['evidence']}" if c["done"] else "")
                 for c in checklist]
        text = ("Evidence checklist:\n" + "\n".join(lines) + "\n" if lines else "") + history_text(self.events, self.max_chars)
        return View(text, list(self.events), {"checklist": [dict(c) for c in checklist]})


# ------------------------------------------------------------------------------------- Gearbox: phase register

_PHASE_RE = re.compile(r"^\s*\**phase\**\s*[:：]\s*([A-Za-z_]+)\W*$", re.I | re.M)


@dataclass
class PhaseRegisterAction(ReActAction):
    """A (Gearbox phase register): ReAct that is the sole writer of a phase register (``ctx.state['phase']``). A reply may
    switch phase with a ``Phase: <name>`` line; without one the phase advances after ``steps_per_phase``
    steps in it. The tool policy and the memory read the register to switch tools and memory schema."""
    phases: str = field(default="explore,verify,answer", metadata={"help": "comma-separated phases, in order"})
    steps_per_phase: int = field(default=3, metadata={"help": "steps in a phase before it advances on its own"})

    def reset(self, ctx: Ctx) -> None:
        self.order = _names(self.phases) or ["act"]
        self.entered = 0
        ctx.state["phase"] = self.order[0]
        ctx.state["phase_log"] = [(0, self.order[0])]

    def switch(self, ctx: Ctx, phase: str, step: int) -> None:
        if phase != ctx.state.get("phase"):
            ctx.state["phase"] = phase
            ctx.state["phase_log"].append((step, phase))
            self.entered = step

    def act(self, context: Context, ctx: Ctx) -> Decision:
        phase = ctx.state.get("phase", self.order[0])
        directive = f"Phase: {phase} (phases: {', '.join(self.order)}). {context.directive.text}".strip()
        reply = ctx.llm.chat(step_messages(context, ctx, self.max_candidates, directive=directive),
                             max_new_tokens=self.max_new_tokens, stop=["\nObservation"]).text
        m = _PHASE_RE.search(reply)
        asked = m.group(1).lower() if m and m.group(1).lower() in self.order else None
        if m:
            reply = reply[: m.start()] + reply[m.end():]
        thought, action = parse_react(reply)
        decision = to_decision(action, thought, context, ctx, self.rerank)
        if asked is None and phase != self.order[-1] and context.step - self.entered >= self.steps_per_phase:
            asked = self.order[min(self.order.index(phase) + 1, len(self.order) - 1)] if phase in self.order else self.order[0]
        if asked:
            self.switch(ctx, asked, context.step)
        decision.data["phase"] = ctx.state["phase"]
        return decision


@dataclass
class PhaseToolPolicy:
    """F (Gearbox tools per phase): reads the phase register; the final-answer tools are exposed only in the final phase,
    the other tools in every phase. Without a register (no writer composed) everything is exposed."""
    gated: str = field(default=_ANSWER_TOOLS, metadata={"help": "comma-separated tools exposed only in the final phase"})
    final_phase: str = field(default="answer", metadata={"help": "the phase that exposes the gated tools"})

    def reset(self, ctx: Ctx) -> None:
        pass

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        if ctx.state.get("phase", self.final_phase) == self.final_phase:
            return list(registry)
        hidden = set(_names(self.gated))
        return [c for c in registry if c.name not in hidden] or list(registry)


@dataclass
class PhaseAwareMemory:
    """M (Gearbox phase-aware schema): one event store shown in a schema chosen by the phase register: ``transcript`` (the
    recent turns), ``findings+recent`` (one line per informative result, then the last turns) or
    ``findings`` (the evidence only). ``view.data['schema']`` says which was used."""
    schemas: str = field(default="explore:transcript,verify:findings+recent,answer:findings",
                         metadata={"help": "phase:schema pairs (schemas: transcript, findings+recent, findings)"})
    max_chars: int = field(default=1800, metadata={"help": "characters of transcript in the transcript schema"})
    recent_chars: int = field(default=500, metadata={"help": "characters of recent turns beside the findings"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.findings: list[str] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if _informative(event):
            self.findings.append(f"[s{event.step}] {clip(event.content, 120)}")

    def schema(self, phase: str) -> str:
        table = dict(p.split(":", 1) for p in _names(self.schemas) if ":" in p)
        return table.get(phase, "transcript").strip()

    def view(self, ctx: Ctx) -> View:
        phase = str(ctx.state.get("phase", ""))
        schema = self.schema(phase)
        findings = "Findings:\n" + ("\n".join(self.findings[-8:]) or "(none yet)")
        if schema == "findings":
            text = f"{findings}\nLatest: {clip(_last_seen(self.events), 300)}"
        elif schema == "findings+recent":
            text = f"{findings}\nRecent:\n{history_text(self.events, self.recent_chars)}"
        else:
            text = history_text(self.events, self.max_chars)
        return View(text, list(self.events), {"schema": schema, "phase": phase})


# ------------------------------------------------------------------------------------- Palimpsest: bounded DAG

@dataclass
class BoundedDAGPlanner(DAGPlanner):
    """P (Palimpsest bounded DAG): turns the request into a DAG of sub-tasks with bounded shape: dependency chains at
    most ``max_depth`` long (a deeper node hangs from shallower ancestors only) and at most ``max_width``
    nodes ready at once; each ready node carries its depth for the executor."""
    max_width: int = field(default=2, metadata={"help": "ready nodes offered at once"})
    max_depth: int = field(default=3, metadata={"help": "longest dependency chain kept"})

    def depth(self, nid: int) -> int:
        return 1 + max((self.depth(d) for d in self.dag.nodes[nid]["deps"]), default=0)

    def _write(self, view: View, ctx: Ctx, kind: str) -> None:
        super()._write(view, ctx, kind)
        for nid in sorted(self.dag.nodes):  # ids ascend with insertion, so deps are bounded before dependants
            node = self.dag.nodes[nid]
            node["deps"] = [d for d in node["deps"] if self.depth(d) < self.max_depth]
            node["depth"] = self.depth(nid)

    def plan(self, view: View, ctx: Ctx) -> Directive:
        directive = super().plan(view, ctx)
        ready = [{**n, "depth": self.dag.nodes[n["id"]].get("depth", 1)} for n in directive.data["ready"][: self.max_width]]
        lines = directive.text.split("\n")
        if len(directive.data["ready"]) > len(ready):  # the first line lists the ready nodes: only those offered
            lines[0] = "Ready sub-tasks: " + "; ".join(f"[{n['id']}] {n['text']}" for n in ready)
        text = "\n".join(lines)
        return Directive(text, {**directive.data, "ready": ready, "max_width": self.max_width, "max_depth": self.max_depth})


@dataclass
class BoundedDAGExecutor(DAGParallelAction):
    """A (Palimpsest bounded executor): executes the DAG with bounded width and depth: one proposal per ready node, at most
    ``max_parallel`` per round (the rest are queued, no new calls), nodes deeper than ``max_depth`` are
    not executed. ``ctx.state['dag_rounds']`` lists the node ids proposed per round."""
    max_depth: int = field(default=3, metadata={"help": "deepest DAG node executed"})

    def reset(self, ctx: Ctx) -> None:
        super().reset(ctx)
        self.rounds: list[list] = []
        ctx.state["dag_rounds"] = self.rounds

    def act(self, context: Context, ctx: Ctx) -> Decision:
        ready = [n for n in context.directive.data.get("ready") or [] if n.get("depth", 1) <= self.max_depth]
        context = replace(context, directive=Directive(context.directive.text, {**context.directive.data, "ready": ready}))
        self.round: list = []
        decision = super().act(context, ctx)
        if self.round:
            self.rounds.append(self.round)
        return decision

    def _propose(self, context: Context, ctx: Ctx, node: dict | None) -> Decision:
        self.round.append(node["id"] if node else None)
        return super()._propose(context, ctx, node)


@dataclass
class ArtifactMemory:
    """M (Palimpsest artifact store): a short transcript plus two stores: artifacts (each informative result keyed by the
    action that produced it, shown so it is reused instead of recomputed) and reasoning state (the latest
    thoughts)."""
    max_chars: int = field(default=1200, metadata={"help": "characters of recent transcript shown"})
    max_artifacts: int = field(default=6, metadata={"help": "artifacts shown (most recent kept)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.artifacts: dict[str, dict] = {}
        self.thoughts: list[str] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind == "action" and event.data.get("thought"):
            self.thoughts.append(clip(event.data["thought"], 100))
        elif _informative(event):
            action = next((e.content for e in reversed(self.events) if e.kind == "action"), "")
            self.artifacts.pop(action, None)  # re-insert: the latest result of an action comes last
            self.artifacts[action] = {"result": clip(event.content, 160), "source": f"s{event.step}"}

    def view(self, ctx: Ctx) -> View:
        shown = list(self.artifacts.items())[-self.max_artifacts:]
        text = ("Artifacts (reuse, do not recompute):\n" + "\n".join(f"- {a} -> {v['result']}" for a, v in shown) + "\n"
                if shown else "")
        text += ("Reasoning so far: " + " | ".join(self.thoughts[-3:]) + "\n") if self.thoughts else ""
        return View(text + history_text(self.events, self.max_chars), list(self.events),
                    {"artifacts": dict(shown), "thoughts": self.thoughts[-3:]})


# ------------------------------------------------------------------------------------- Trapdoor: fact graph

_FACT_IS = re.compile(r"^(?:the |a |an )?([\w' -]{2,40}?)\s+(is|are|has|have|contains|holds|leads to)\s+(.{2,80})$", re.I)
_FACT_COLON = re.compile(r"^([\w' -]{2,40}):\s*(.{1,80})$")
_FACT_SEE = re.compile(r"\byou (?:see|find|notice)\s+(.{2,80})$", re.I)


def extract_facts(text: str, source: str, max_facts: int = 6) -> list[tuple[str, str, str, str]]:
    """(subject, relation, object, source) triples read leniently from prose: "X is/has/contains Y",
    "X: Y" lines, "you see Y". Anything else yields nothing."""
    out = []
    for part in re.split(r"[.;\n]+", str(text)):
        part = part.strip()
        if not part:
            continue
        m = _FACT_SEE.search(part)
        if m:
            out.append(("you", "see", clip(m.group(1), 60), source))
        elif (m := _FACT_IS.match(part)) and m.group(1).strip().lower() not in ("it", "there", "this", "that"):
            out.append((m.group(1).strip().lower(), m.group(2).lower(), clip(m.group(3), 60), source))
        elif m := _FACT_COLON.match(part):
            out.append((m.group(1).strip().lower(), "is", clip(m.group(2), 60), source))
        if len(out) >= max_facts:
            break
    return out


@dataclass
class FactGraphMemory:
    """M (Trapdoor fact graph): the orchestrator's transcript plus a fact graph (entity -> relation -> value, each edge
    with its source). Facts come from the orchestrator (``ctx.state['facts_inbox']``: what it extracted
    from a sub-agent's report and trajectory) and from the orchestrator's own observations."""
    max_chars: int = field(default=1200, metadata={"help": "characters of recent transcript shown"})
    max_facts: int = field(default=12, metadata={"help": "facts shown (most recent kept)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.graph: dict[str, dict[str, tuple[str, str]]] = {}   # subject -> {relation object: (relation, source)}
        self.edges: list[tuple[str, str, str, str]] = []

    def add(self, fact: tuple) -> None:
        subject, relation, obj, source = fact
        key = f"{relation} {obj}"
        if key not in self.graph.setdefault(subject, {}):
            self.graph[subject][key] = (relation, source)
            self.edges.append((subject, relation, obj, source))

    def drain(self, ctx: Ctx) -> None:
        inbox = ctx.state.get("facts_inbox") or []
        while inbox:
            self.add(tuple(inbox.pop(0)))

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        self.drain(ctx)
        if event.kind in ("observation", "tool_result"):
            for fact in extract_facts(event.content, f"s{event.step}", 3):
                self.add(fact)

    def view(self, ctx: Ctx) -> View:
        self.drain(ctx)
        shown = self.edges[-self.max_facts:]
        text = ("Fact graph:\n" + "\n".join(f"- {s} --{r}--> {o} [{src}]" for s, r, o, src in shown) + "\n") if shown else ""
        return View(text + history_text(self.events, self.max_chars), list(self.events), {"facts": list(shown)})


@dataclass
class OrchestratorAction(CoordinatorAction):
    """A (Trapdoor delegation intercept): the ``delegate`` call is intercepted by an orchestrator loop that runs a bounded
    sub-agent (at most ``subagent_steps`` env actions each, at most ``max_delegations`` per episode, then
    the orchestrator acts itself) and writes the facts extracted from the sub-agent's report and
    trajectory into the fact-graph memory (``ctx.state['facts_inbox']``)."""
    max_delegations: int = field(default=3, metadata={"help": "sub-agents per episode; then the orchestrator acts directly"})
    max_facts: int = field(default=8, metadata={"help": "facts extracted per sub-agent"})

    def reset(self, ctx: Ctx) -> None:
        super().reset(ctx)
        ctx.state["max_delegations"] = self.max_delegations
        ctx.state["facts_inbox"] = []

    def act(self, context: Context, ctx: Ctx) -> Decision:
        if self.sub is not None:
            decision = self.sub.act(context.observation, ctx)
            if decision is not None:
                return decision
            record = self._close(ctx)  # it wrote its report: back to the orchestrator, with the report as a hint
            context = replace(context, capabilities=list(ctx.task.tools) + [DELEGATE],
                              hints=context.hints + [f"Report from {record['agent']}: {record['report']}"])
        if len(ctx.state["delegations"]) >= self.max_delegations:
            env_tools = [c for c in context.capabilities if c.name != DELEGATE.name] or list(ctx.task.tools)
            return ReActAction.act(self, replace(context, capabilities=env_tools), ctx)
        return super().act(context, ctx)

    def _close(self, ctx: Ctx) -> dict:
        sub: SubAgent | None = self.sub
        record = super()._close(ctx)
        if sub is not None:
            facts = extract_facts(sub.report, sub.name, self.max_facts)
            for e in sub.events:
                if e.kind == "observation":
                    facts += extract_facts(e.content, f"{sub.name}:s{e.step}", 2)
            ctx.state["facts_inbox"].extend(facts[: self.max_facts])
            record.update(steps=sub.steps, facts=len(facts[: self.max_facts]))
        return record


@dataclass
class DelegationInterceptPolicy(AgentDelegation):
    """F (Trapdoor bounded delegation): the registry plus ``delegate`` while delegations are left
    (``ctx.state['max_delegations']``); while a sub-agent runs, only its tools."""

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        chosen = super().select(directive, view, registry, ctx)
        if len(ctx.state.get("delegations") or []) < ctx.state.get("max_delegations", float("inf")):
            return chosen
        return [c for c in chosen if c.name != DELEGATE.name] or list(registry)


# ------------------------------------------------------------------------------------- Origami: fold step

@dataclass
class SubtaskTreePlanner:
    """P (Origami subtask tree): decomposes the task once into subtasks, each worked in its own context with a step
    budget; moves on when a step is rewarded or the budget is spent, then asks for aggregation.
    Writes ``ctx.state['subtask']`` ({id, text}; id 0 = aggregation) as soon as it moves on."""
    max_items: int = field(default=3, metadata={"help": "subtasks per task"})
    subtask_steps: int = field(default=3, metadata={"help": "env steps per subtask before moving on without reward"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens for the decomposition call"})

    def reset(self, ctx: Ctx) -> None:
        self.items: list[str] = []
        self.index = self.spent = 0
        self.written = False

    def current(self, ctx: Ctx) -> None:
        ctx.state["subtask"] = ({"id": self.index + 1, "text": self.items[self.index]} if self.index < len(self.items)
                                else {"id": 0, "text": "aggregate the subtasks' results"})

    def on_init(self, ctx: Ctx, obs: Observation) -> None:
        # before the first view: the memory files the opening observation under subtask 1
        self.decompose(ctx)

    def decompose(self, ctx: Ctx) -> None:
        prompt = render_prompt(ctx.prompts, "decompose", task=ctx.task.public(), goal=ctx.task.description,
                               max_items=self.max_items)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        self.items = [clip(t, 80) for t, _ in parse_subtasks(reply, self.max_items)] or ["make progress toward the task goal"]
        self.written = True
        self.current(ctx)

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if not self.written:
            self.decompose(ctx)
        sub = ctx.state["subtask"]
        text = (f"Subtask {sub['id']}/{len(self.items)}: {sub['text']}" if sub["id"] else
                "All subtasks are folded: aggregate their results and finish the task.")
        return Directive(text, {"subtask": dict(sub), "subtasks": list(self.items)})

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        if self.index >= len(self.items):
            return
        self.spent += 1
        if obs.reward > 0 or self.spent >= self.subtask_steps:
            self.index, self.spent = self.index + 1, 0
            self.current(ctx)


@dataclass
class HierarchicalFoldMemory:
    """M (Origami fold of active context): each subtask works in an isolated active context. When the planner moves on
    (``ctx.state['subtask']`` changes), a fold step replaces only the active working context by a short
    artifact (one backbone call; the last informative result if the reply is empty); the full
    trajectories and the earlier artifacts are kept unchanged. The view: the artifacts of folded subtasks,
    the active context, the latest observation."""
    fold_tokens: int = field(default=48, metadata={"help": "tokens for a fold summary"})
    active_chars: int = field(default=1200, metadata={"help": "characters of the active context shown"})

    def reset(self, ctx: Ctx) -> None:
        self.active: list[Event] = []
        self.active_id = None
        self.trajectories: dict = {}
        self.artifacts: dict = {}
        self.folds = 0
        self.latest = self.subtask_text = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        self.active.append(event)
        self.trajectories.setdefault(self.active_id, []).append(event)
        if event.kind in ("observation", "tool_result"):
            self.latest = event.content

    def fold(self, ctx: Ctx) -> None:
        """Replace the active context by its artifact; nothing else changes."""
        steps = history_text(self.active, 800)
        prompt = render_prompt(ctx.prompts, "fold_context", task=ctx.task.public(),
                               subtask=(self.subtask_text or "the previous subtask"), steps=steps)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.fold_tokens).text
        informative = [e.content for e in self.active if _informative(e)]
        summary = clip(reply, 200) if meaningful(reply) else clip(informative[-1] if informative else "no progress", 200)
        self.artifacts[self.active_id] = summary
        self.active = []
        self.folds += 1

    def view(self, ctx: Ctx) -> View:
        sub = ctx.state.get("subtask") or {}
        if sub.get("id") != self.active_id:
            if self.active_id is not None and self.active:
                self.fold(ctx)
            elif self.active_id is None:  # the opening observation belongs to the first subtask
                self.trajectories[sub.get("id")] = self.trajectories.pop(None, [])
            self.active_id = sub.get("id")
        self.subtask_text = sub.get("text", "")
        folded = "\n".join(f"- subtask {k}: {v}" for k, v in self.artifacts.items())
        text = (f"Folded subtasks:\n{folded}\n" if folded else "") + "Active context:\n" + \
            (history_text(self.active, self.active_chars) or "(new subtask)") + f"\nNow: {clip(self.latest, 300)}"
        return View(text, list(self.active), {"artifacts": dict(self.artifacts), "active": self.active_id, "folds": self.folds})


# ------------------------------------------------------------------------------------- Pegboard: evidence matrix

@dataclass
class EvidenceMatrixMemory:
    """M (Pegboard evidence matrix): every observation gets a source id (``s<step>``) and becomes cells of a candidate x clue
    evidence matrix: for each candidate it mentions (or the single candidate ``answer``) the still empty
    clue cell it matches best; a cell keeps its first evidence and that source id. ``ctx.state['coverage']`` is the
    share of cells filled. Axes come from ``ctx.state['clues']`` / ``['matrix_candidates']`` (the planner)."""
    max_chars: int = field(default=1200, metadata={"help": "characters of recent transcript shown"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.sources: dict[str, str] = {}
        self.cells: dict[tuple[str, str], dict] = {}
        self.unsorted: list[str] = []

    def axes(self, ctx: Ctx) -> tuple[list[str], list[str]]:
        clues = list(ctx.state.get("clues") or [ctx.task.description[:80]])
        return list(ctx.state.get("matrix_candidates") or ["answer"]), clues

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind not in ("observation", "tool_result"):
            return
        sid = f"s{event.step}" if f"s{event.step}" not in self.sources else f"s{event.step}.{len(self.sources)}"
        self.sources[sid] = clip(event.content, 200)
        if not _informative(event):
            return
        candidates, clues = self.axes(ctx)
        placed = False
        for cand in candidates:
            if cand != "answer" and not _overlap(cand, event.content):
                continue
            empty = [q for q in clues if (cand, q) not in self.cells and _overlap(q, event.content)]
            if empty:
                best = max(empty, key=lambda q: _overlap(q, event.content))
                self.cells[(cand, best)] = {"value": clip(event.content, 80), "source": sid}
                placed = True
        if not placed:
            self.unsorted.append(sid)
        ctx.state["matrix"] = {f"{c} | {q}": dict(v) for (c, q), v in self.cells.items()}
        ctx.state["coverage"] = len(self.cells) / max(1, len(candidates) * len(clues))

    def view(self, ctx: Ctx) -> View:
        candidates, clues = self.axes(ctx)
        rows = [f"- {c}: " + "; ".join(f"{q[:30]}={self.cells[(c, q)]['value'][:40]} [{self.cells[(c, q)]['source']}]"
                                       if (c, q) in self.cells else f"{q[:30]}=?" for q in clues) for c in candidates]
        text = f"Evidence matrix (coverage {ctx.state.get('coverage', 0.0):.0%}):\n" + "\n".join(rows) + "\n"
        return View(text + history_text(self.events, self.max_chars), list(self.events),
                    {"cells": {f"{c} | {q}": dict(v) for (c, q), v in self.cells.items()}})


@dataclass
class MatrixCoveragePlanner:
    """P (Pegboard matrix coverage): one call lists the clues the answer must satisfy and the candidates; then matrix
    coverage drives the directive (the uncovered clues to investigate) and the switch to verification
    (``ctx.state['verify']``) once coverage reaches ``verify_at``."""
    max_clues: int = field(default=3, metadata={"help": "clues (matrix columns)"})
    max_candidates: int = field(default=3, metadata={"help": "candidates (matrix rows)"})
    verify_at: float = field(default=0.67, metadata={"help": "coverage that switches to verification"})
    max_new_tokens: int = field(default=96, metadata={"help": "tokens for the axes call"})

    def reset(self, ctx: Ctx) -> None:
        self.written = False

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if not self.written:
            prompt = render_prompt(ctx.prompts, "matrix_axes", task=ctx.task.public(), view=view.text[-600:],
                                   max_clues=self.max_clues, max_candidates=self.max_candidates)
            reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
            axes = ("clues", "candidates")
            clues = _section_list(reply, "clues", axes, self.max_clues) or \
                [clip(s, 80) for s in re.split(r"(?<=[.?!])\s+", ctx.task.description) if len(tokens(s)) >= 2][: self.max_clues]
            ctx.state["clues"] = [clip(c, 60) for c in clues] or ["the answer"]
            ctx.state["matrix_candidates"] = [clip(c, 40) for c in _section_list(reply, "candidates", axes, self.max_candidates)]
            ctx.state.setdefault("coverage", 0.0)
            self.written = True
        matrix = ctx.state.get("matrix") or {}
        covered = {k.split(" | ", 1)[1] for k in matrix}
        ctx.state["verify"] = ctx.state.get("verify") or ctx.state.get("coverage", 0.0) >= self.verify_at
        if ctx.state["verify"]:
            text = "Evidence matrix is covered: verify the leading candidate against every clue, then give the answer."
        else:
            todo = [q for q in ctx.state["clues"] if q not in covered]
            text = "Find evidence for: " + "; ".join(todo or ctx.state["clues"])
        return Directive(text, {"coverage": ctx.state.get("coverage", 0.0), "verify": ctx.state["verify"]})
