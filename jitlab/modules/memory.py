"""Memory modules (M): events in, a view of history out.

    from jitlab.modules.memory import PeriodicSummaryMemory
    class Memory(PeriodicSummaryMemory): pass        # in a harness folder's memory.py

Each class is a dataclass (config fields with help) built with no arguments. Backbone calls are
infrequent (every k steps or at fold points) and short (``max_new_tokens`` small); whenever a reply
does not parse, the module falls back to a heuristic built from the events themselves, so a
garbage-writing backbone degrades the view but never breaks the episode.

Coordination through ``ctx.state`` (shared controller state):
    "fold"            AgentFold directive written by ReActFoldAction, read by MultiScaleFoldingMemory
    "fold_requested"  DeepAgent <fold> marker from MarkerAction, read by ThreeTierMemory
    "subgoal"         HiAgent subgoal dict from SubgoalPlanner, read by SubgoalWorkingMemory
    "subtask", "context_results"   ROMA node id / inputs from RecursiveDAGPlanner, read by IsolatedContextMemory
    "rollout_notes"   AggAgent proposals from MultiRolloutAggregation, read by RolloutHistories
    "subagent", "delegations"      AOrchestra sub-agent status / records from CoordinatorAction

Caveats: views avoid lines starting with "- " because the prompts use that bullet for admissible
commands (scripted doubles pick from those lines).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.modules.basic import FullHistory, history_text
from jitlab.modules.text import clip, is_failure, lexical_rank, meaningful, render_prompt, sections, step_pairs, user
from jitlab.protocol import Ctx, Event, View

__all__ = ["FullHistory", "PeriodicSummaryMemory", "MemoPageMemory", "ReasoningGraphMemory",
           "MultiScaleFoldingMemory", "SubgoalWorkingMemory", "ThreeTierMemory", "IsolatedContextMemory",
           "RolloutHistories", "CoordinatorHistory"]


def _step_line(pair: dict, obs_chars: int = 80) -> str:
    if not pair["action"]:
        return f"start: {clip(pair['observation'], obs_chars)}"
    return f"{clip(pair['action'], 40)} -> {clip(pair['observation'], obs_chars)}"


def _heuristic_facts(events: list[Event], max_items: int = 4) -> tuple[list[str], list[str]]:
    """(verified evidence, actions tried): observations that came with a reward count as verified."""
    pairs = step_pairs(events)
    verified = [_step_line(p) for p in pairs if p["reward"] > 0][-max_items:]
    tried = [clip(p["action"], 40) for p in pairs if p["action"]][-max_items * 2:]
    return verified, tried


def _last_observation(events: list[Event]) -> str:
    return next((e.content for e in reversed(events) if e.kind in ("observation", "tool_result")), "")



def _overdue(fresh: list[Event], step: int, last_step: int, every: int, limit_chars: int) -> bool:
    """Compaction is due every ``every`` steps, or sooner when the fresh transcript outgrows ``limit_chars``."""
    if every and step - last_step >= every:
        return True
    return len(history_text(fresh, 10 ** 9)) > limit_chars

@dataclass
class PeriodicSummaryMemory:
    """M (ReSum): every k steps summarize verified evidence, gaps and next steps, then restart the
    context from question + summary (plus the latest observation)."""
    every_k: int = field(default=5, metadata={"help": "summarize every k steps (0: only on length)"})
    trigger_chars: int = field(default=2000, metadata={"help": "also summarize when the unsummarized transcript is longer"})
    restart: bool = field(default=True, metadata={"help": "True: drop summarized events (ReSum restart); "
                                                          "False: keep keep_recent events under the summary"})
    keep_recent: int = field(default=4, metadata={"help": "events kept verbatim below the summary when restart=False"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens the backbone may write per summary"})
    section_chars: int = field(default=160, metadata={"help": "characters kept per summary section"})
    max_chars: int = field(default=2500, metadata={"help": "characters of recent transcript shown"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.start = 0                 # first event not yet covered by a summary
        self.summary = ""
        self.verified: list[str] = []
        self.tried: list[str] = []
        self.last_summary_step = 0
        self.summaries = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)

    def _due(self, ctx: Ctx) -> bool:
        fresh = self.events[self.start:]
        if ctx.step <= self.last_summary_step or len(fresh) < 3:
            return False
        return _overdue(fresh, ctx.step, self.last_summary_step, self.every_k, self.trigger_chars)

    def summarize(self, ctx: Ctx) -> None:
        fresh = self.events[self.start:]
        prompt = render_prompt(ctx.prompts, "summary", task=ctx.task.public(), summary=self.summary,
                               transcript=history_text(fresh, self.max_chars))
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        verified, tried = _heuristic_facts(fresh)
        self.verified = (self.verified + verified)[-6:]
        self.tried = (self.tried + tried)[-8:]
        parts = sections(reply, ("Evidence", "Gaps", "Next"))
        lines = [f"Verified: {'; '.join(self.verified)}" if self.verified else "Verified: nothing yet",
                 f"Tried: {', '.join(self.tried)}"]
        lines += [f"{k}: {clip(v, self.section_chars)}" for k, v in parts.items()]
        self.summary = "\n".join(lines)
        self.start = max(len(self.events) - 1, 0)   # the latest observation stays verbatim
        self.last_summary_step = ctx.step
        self.summaries += 1

    def view(self, ctx: Ctx) -> View:
        if self._due(ctx):
            self.summarize(ctx)
        begin = self.start if self.restart else max(0, self.start - self.keep_recent)
        recent = self.events[begin:]
        transcript = history_text(recent, self.max_chars)
        text = f"Progress summary:\n{self.summary}\n\nRecent:\n{transcript}" if self.summary else transcript
        return View(text, recent, {"summary": self.summary, "summaries": self.summaries})


@dataclass
class MemoPageMemory:
    """M (GAM): a short memo per step plus a page store of full steps, searched on demand for the
    pages relevant to the current situation."""
    top_k: int = field(default=2, metadata={"help": "pages retrieved per view"})
    max_memos: int = field(default=8, metadata={"help": "most recent memos shown"})
    memo_chars: int = field(default=70, metadata={"help": "characters per memo"})
    page_chars: int = field(default=300, metadata={"help": "characters per retrieved page"})
    query_every: int = field(default=4, metadata={"help": "every k steps the backbone writes the search query "
                                                          "(0: always the lexical query from the latest observation)"})
    max_new_tokens: int = field(default=16, metadata={"help": "tokens for a backbone-written query"})

    def reset(self, ctx: Ctx) -> None:
        self.pages: list[dict] = []     # {id, step, text}
        self.memos: list[str] = []
        self.pending: Event | None = None
        self.query = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        if event.kind == "action":
            self.pending = event
            return
        if event.kind not in ("observation", "tool_result"):
            return
        n = len(self.pages) + 1
        if self.pending is not None:
            text = f"Action: {self.pending.content}\nObservation: {event.content}"
            memo = f"p{n}: {clip(self.pending.content, 30)} -> {clip(event.content, self.memo_chars)}"
        else:
            text, memo = f"Observation: {event.content}", f"p{n}: start: {clip(event.content, self.memo_chars)}"
        self.pages.append({"id": n, "step": event.step, "text": text})
        self.memos.append(memo)
        self.pending = None

    def search(self, query: str, k: int) -> list[dict]:
        """The k stored pages (latest excluded: it is always shown) most relevant to ``query``."""
        older = self.pages[:-1]
        scores = lexical_rank(query, [p["text"] for p in older])
        ranked = sorted(range(len(older)), key=lambda i: (-scores[i], -i))
        return [older[i] for i in ranked[:k] if scores[i] > 0]

    def view(self, ctx: Ctx) -> View:
        latest = self.pages[-1]["text"] if self.pages else ""
        query = latest
        if self.query_every and ctx.step > 1 and ctx.step % self.query_every == 0 and len(self.pages) > 2:
            prompt = render_prompt(ctx.prompts, "page_query", task=ctx.task.public(),
                                   memos=self.memos[-self.max_memos:], latest=clip(latest, 400))
            reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
            self.query = clip(reply.splitlines()[0] if reply.strip() else "", 80)
        query = f"{self.query} {latest}"
        found = self.search(query, self.top_k)
        memos = "\n".join(self.memos[-self.max_memos:])
        pages = "\n".join(f"[p{p['id']}] {clip(p['text'], self.page_chars)}" for p in found) or "(none)"
        text = f"Memos:\n{memos}\n\nPages found on demand:\n{pages}\n\nLatest:\n{latest}"
        return View(text, [], {"pages": [p["id"] for p in found], "query": query, "stored": len(self.pages)})


@dataclass
class ReasoningGraphMemory:
    """M (MemoBrain): a graph of reasoning steps; finished sub-trajectories fold into one node and
    low-value steps (failures, repeats) are flushed."""
    fold_every: int = field(default=4, metadata={"help": "fold the open steps after this many (a rewarded step folds at once)"})
    max_open: int = field(default=6, metadata={"help": "open steps kept before low-value ones are flushed"})
    llm_fold: bool = field(default=True, metadata={"help": "let the backbone write fold summaries (else heuristic)"})
    max_new_tokens: int = field(default=40, metadata={"help": "tokens per fold summary"})
    node_chars: int = field(default=140, metadata={"help": "characters per node"})
    max_folds: int = field(default=8, metadata={"help": "most recent folded nodes shown"})

    def reset(self, ctx: Ctx) -> None:
        self.nodes: list[dict] = []       # {id, kind: step|fold, text, value, children, parent}
        self.open: list[dict] = []
        self.pending: Event | None = None
        self.latest = ""
        self.flushed = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        if event.kind == "action":
            self.pending = event
            return
        if event.kind not in ("observation", "tool_result"):
            return
        previous, self.latest = self.latest, event.content
        if self.pending is None:
            return
        reward = float(event.data.get("reward", 0.0) or 0.0)
        value = 1 if reward > 0 else -1 if (is_failure(event.content) or event.content == previous) else 0
        thought = self.pending.data.get("thought", "")
        text = f"{clip(thought, 50) + ' | ' if thought else ''}{clip(self.pending.content, 40)} -> {clip(event.content, 80)}"
        node = {"id": f"s{event.step}", "kind": "step", "text": text, "value": value, "children": []}
        self.nodes.append(node)
        self.open.append(node)
        self.pending = None
        if value > 0 or len(self.open) >= self.fold_every:
            self.fold(ctx)
        elif len(self.open) > self.max_open:
            self.flush()

    def flush(self) -> None:
        """Drop the open steps of negative value (keep the most recent one)."""
        keep = [n for n in self.open[:-1] if n["value"] >= 0] + self.open[-1:]
        self.flushed += len(self.open) - len(keep)
        self.open = keep

    def fold(self, ctx: Ctx) -> None:
        """Fold the open sub-trajectory into one node; its failed steps are flushed, not summarized."""
        useful = [n for n in self.open if n["value"] >= 0] or self.open[-1:]
        self.flushed += len(self.open) - len(useful)
        summary = ""
        if self.llm_fold:
            prompt = render_prompt(ctx.prompts, "graph_fold", task=ctx.task.public(), steps=[n["text"] for n in useful])
            reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
            summary = clip(reply, self.node_chars) if meaningful(reply) else ""
        heuristic = clip("; ".join(n["text"].split(" | ")[-1] for n in useful), self.node_chars)
        folds = [n for n in self.nodes if n["kind"] == "fold"]
        node = {"id": f"F{len(folds) + 1}", "kind": "fold", "text": summary or heuristic,
                "value": max(n["value"] for n in useful), "children": [n["id"] for n in self.open],
                "parent": folds[-1]["id"] if folds else None, "outcome": heuristic}
        self.nodes.append(node)
        self.open = []

    def view(self, ctx: Ctx) -> View:
        folds = [n for n in self.nodes if n["kind"] == "fold"][-self.max_folds:]
        lines = ["Reasoning graph (folded sub-trajectories):"] if folds else []
        lines += [f"[{n['id']} <- {','.join(n['children'])}] {n['text']}" for n in folds]
        if self.open:
            lines.append("Open steps:")
            lines += [f"[{n['id']}] {n['text']}" for n in self.open]
        lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), [], {"nodes": len(self.nodes), "folds": len(folds), "flushed": self.flushed})


@dataclass
class MultiScaleFoldingMemory:
    """M (AgentFold): the context is a list of multi-scale summaries plus the latest full step; each
    step either condenses the latest step into a summary or merges it with the last k summaries."""
    max_blocks: int = field(default=6, metadata={"help": "summaries kept before the oldest ones are merged"})
    merge_span: int = field(default=3, metadata={"help": "summaries merged together when max_blocks is exceeded"})
    block_chars: int = field(default=160, metadata={"help": "characters per summary"})

    def reset(self, ctx: Ctx) -> None:
        self.blocks: list[dict] = []     # {lo, hi, text}
        self.latest: dict | None = None  # {step, action, thought, observation}
        self.start_obs = ""
        self.folds = {"condense": 0, "merge": 0}

    def update(self, event: Event, ctx: Ctx) -> None:
        if event.kind == "action":
            if self.latest is not None:
                self.fold(ctx.state.pop("fold", None) or {"op": "condense"})
            self.latest = {"step": event.step, "action": event.content,
                           "thought": event.data.get("thought", ""), "observation": ""}
        elif event.kind in ("observation", "tool_result"):
            if self.latest is None:
                self.start_obs = event.content
            else:
                self.latest["observation"] = event.content

    def fold(self, directive: dict) -> None:
        """Apply a fold directive {op: condense|merge, k, summary} to the latest step."""
        s = self.latest
        heuristic = f"{clip(s['action'], 40)} -> {clip(s['observation'], 70)}"
        summary = clip(directive.get("summary") or "", self.block_chars)
        k = int(directive.get("k") or 1)
        if directive.get("op") == "merge" and self.blocks:
            merged = self.blocks[-k:]
            del self.blocks[-k:]
            text = summary or clip("; ".join(b["text"] for b in merged) + "; " + heuristic, self.block_chars)
            self.blocks.append({"lo": merged[0]["lo"], "hi": s["step"], "text": text})
            self.folds["merge"] += 1
        else:
            self.blocks.append({"lo": s["step"], "hi": s["step"], "text": summary or heuristic})
            self.folds["condense"] += 1
        while len(self.blocks) > self.max_blocks:
            old = self.blocks[: self.merge_span]
            self.blocks[: self.merge_span] = [{"lo": old[0]["lo"], "hi": old[-1]["hi"],
                                               "text": clip("; ".join(b["text"] for b in old), self.block_chars)}]

    def view(self, ctx: Ctx) -> View:
        lines = [f"Start: {clip(self.start_obs, 300)}"]
        if self.blocks:
            lines.append("Folded context:")
            lines += [f"[{b['lo']}{'-' + str(b['hi']) if b['hi'] != b['lo'] else ''}] {b['text']}" for b in self.blocks]
        if self.latest is not None:
            s = self.latest
            lines.append(f"Latest step ({s['step']}):")
            if s["thought"]:
                lines.append(f"Thought: {s['thought']}")
            lines += [f"Action: {s['action']}", f"Observation: {s['observation']}"]
        return View("\n".join(lines), [], {"blocks": [dict(b) for b in self.blocks], "folds": dict(self.folds)})


@dataclass
class SubgoalWorkingMemory:
    """M (HiAgent): full action-observation pairs for the current subgoal only; when a subgoal ends
    they collapse into one summary line."""
    llm_summary: bool = field(default=True, metadata={"help": "let the backbone summarize a finished subgoal (else heuristic)"})
    max_new_tokens: int = field(default=40, metadata={"help": "tokens per subgoal summary"})
    summary_chars: int = field(default=160, metadata={"help": "characters per finished-subgoal summary"})
    max_finished: int = field(default=6, metadata={"help": "most recent finished subgoals shown"})
    max_chars: int = field(default=2000, metadata={"help": "characters of working memory shown"})

    def reset(self, ctx: Ctx) -> None:
        self.finished: list[str] = []
        self.working: list[Event] = []
        self.goal: dict | None = None
        self.collapsed_id = None
        self.latest = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        sg = ctx.state.get("subgoal") or {}
        if self.goal is not None and sg.get("id") != self.goal.get("id") and self.collapsed_id != self.goal.get("id"):
            self.collapse(ctx, self.goal, done=False)
        self.goal = dict(sg) if sg else None
        self.working.append(event)
        if event.kind in ("observation", "tool_result"):
            self.latest = event.content
            if sg.get("done") and self.collapsed_id != sg.get("id"):
                self.collapse(ctx, sg, done=True)

    def collapse(self, ctx: Ctx, goal: dict, done: bool) -> None:
        pairs = [p for p in step_pairs(self.working) if p["action"]]
        summary = ""
        if self.llm_summary and pairs:
            prompt = render_prompt(ctx.prompts, "subgoal_summary", task=ctx.task.public(), subgoal=goal.get("text", ""),
                                   transcript=history_text(self.working, 1200))
            reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
            summary = clip(reply, self.summary_chars) if meaningful(reply) else ""
        if not summary:
            summary = (f"did {', '.join(clip(p['action'], 30) for p in pairs[-4:])}; ended with: "
                       f"{clip(pairs[-1]['observation'], 70)}") if pairs else "no actions"
        status = "done" if done else "left"
        self.finished.append(f"Subgoal '{clip(goal.get('text', ''), 60)}' ({status}): {summary}")
        self.working = []
        self.collapsed_id = goal.get("id")

    def view(self, ctx: Ctx) -> View:
        sg = ctx.state.get("subgoal") or {}
        lines = []
        if self.finished:
            lines.append("Finished subgoals:")
            lines += [f"{i + 1}. {s}" for i, s in enumerate(self.finished[-self.max_finished:])]
        if sg and not sg.get("done"):
            lines.append(f"Current subgoal: {sg.get('text', '')}")
        if self.working:
            lines.append("Working memory:")
            lines.append(history_text(self.working, self.max_chars))
        if not self.working or self.working[-1].kind != "observation":
            lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), list(self.working), {"finished": len(self.finished)})


@dataclass
class ThreeTierMemory:
    """M (DeepAgent): episodic, working and tool memory produced by a fold (on a <fold> marker, every
    k steps or when the transcript grows), after which reasoning restarts from the folded memory."""
    fold_every: int = field(default=6, metadata={"help": "fold every k steps (0: only on marker or length)"})
    trigger_chars: int = field(default=2000, metadata={"help": "also fold when the unfolded transcript is longer"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens per fold"})
    tier_chars: int = field(default=200, metadata={"help": "characters per tier entry"})
    max_episodes: int = field(default=5, metadata={"help": "episodic entries shown"})
    max_chars: int = field(default=2000, metadata={"help": "characters of unfolded transcript shown"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.start = 0
        self.episodic: list[str] = []
        self.working = ""
        self.tool_note = ""
        self.tools: dict[str, dict] = {}    # name -> {calls, last}
        self.last_tool: str | None = None
        self.last_fold_step = 0
        self.folds = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind == "action":
            self.last_tool = str(event.data.get("tool", "action"))
            self.tools.setdefault(self.last_tool, {"calls": 0, "last": ""})["calls"] += 1
        elif event.kind in ("observation", "tool_result") and self.last_tool:
            self.tools[self.last_tool]["last"] = clip(event.content, 80)
            self.last_tool = None

    def _due(self, ctx: Ctx) -> bool:
        fresh = self.events[self.start:]
        if len(fresh) < 3 or ctx.step <= self.last_fold_step:
            return False
        if ctx.state.pop("fold_requested", False):
            return True
        return _overdue(fresh, ctx.step, self.last_fold_step, self.fold_every, self.trigger_chars)

    def fold(self, ctx: Ctx) -> None:
        fresh = self.events[self.start:]
        prompt = render_prompt(ctx.prompts, "tier_fold", task=ctx.task.public(), episodic=self.episodic,
                               working=self.working, transcript=history_text(fresh, 1500))
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        parts = sections(reply, ("Episodic", "Working", "Tool"))
        verified, tried = _heuristic_facts(fresh)
        steps = [e.step for e in fresh if e.kind == "action"]
        span = f"steps {steps[0]}-{steps[-1]}" if steps else "start"
        episode = parts.get("Episodic") or f"{', '.join(tried[-4:]) or 'no actions'}" + (f"; progress: {verified[-1]}" if verified else "")
        self.episodic.append(f"{span}: {clip(episode, self.tier_chars)}")
        self.working = clip(parts.get("Working") or _last_observation(fresh), self.tier_chars)
        self.tool_note = clip(parts.get("Tool", ""), self.tier_chars)
        self.start = max(len(self.events) - 1, 0)
        self.last_fold_step = ctx.step
        self.folds += 1

    def view(self, ctx: Ctx) -> View:
        if self._due(ctx):
            self.fold(ctx)
        ctx.state.pop("fold_requested", None)
        lines = []
        if self.episodic:
            lines.append("Episodic memory:")
            lines += [f"{i + 1}. {e}" for i, e in enumerate(self.episodic[-self.max_episodes:])]
            lines.append(f"Working memory: {self.working}")
            tools = "; ".join(f"{k}: {v['calls']} calls, last result: {v['last']}" for k, v in self.tools.items())
            lines.append(f"Tool memory: {tools}{' | ' + self.tool_note if self.tool_note else ''}")
            lines.append("Since the last fold:")
        lines.append(history_text(self.events[self.start:], self.max_chars))
        return View("\n".join(lines), self.events[self.start:], {"folds": self.folds})


@dataclass
class IsolatedContextMemory:
    """M (context isolation): each sub-task (``ctx.state['subtask']``) sees only its own history plus
    the results handed to it (``ctx.state['context_results']``), never its siblings' steps."""
    max_chars: int = field(default=2000, metadata={"help": "characters of the sub-task's own history shown"})
    result_chars: int = field(default=160, metadata={"help": "characters per handed-in result"})

    def reset(self, ctx: Ctx) -> None:
        self.by_task: dict[str, list[Event]] = {}
        self.latest = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        self.by_task.setdefault(str(ctx.state.get("subtask", "root")), []).append(event)
        if event.kind in ("observation", "tool_result"):
            self.latest = event.content

    def view(self, ctx: Ctx) -> View:
        sid = str(ctx.state.get("subtask", "root"))
        own = self.by_task.get(sid, [])
        results = ctx.state.get("context_results") or {}
        lines = []
        if results:
            lines.append("Results handed to this sub-task:")
            lines += [f"* {clip(k, 60)}: {clip(v, self.result_chars)}" for k, v in results.items()]
        lines.append(f"History of sub-task {sid}:" if own else f"Sub-task {sid} starts now.")
        if own:
            lines.append(history_text(own, self.max_chars))
        if not own or own[-1].kind != "observation":
            lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), list(own), {"subtask": sid, "tasks": len(self.by_task)})


@dataclass
class RolloutHistories:
    """M (AggAgent): a shared transcript plus one isolated history per rollout (each rollout sees its
    own earlier proposals, not the others'), so parallel rollouts stay independent."""
    k: int = field(default=3, metadata={"help": "rollout histories kept"})
    notes_shown: int = field(default=3, metadata={"help": "earlier proposals shown to each rollout"})
    max_chars: int = field(default=1200, metadata={"help": "characters of shared transcript shown (K+1 prompts "
                                                           "carry it every step, so it is kept short)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.notes: list[list[str]] = [[] for _ in range(self.k)]

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind == "action":
            for i, note in enumerate((ctx.state.pop("rollout_notes", None) or [])[: self.k]):
                self.notes[i].append(f"step {event.step}: {clip(note, 100)}")

    def view(self, ctx: Ctx) -> View:
        shared = history_text(self.events, self.max_chars)
        rollouts = []
        for i, notes in enumerate(self.notes):
            own = "\n".join(notes[-self.notes_shown:])
            rollouts.append(f"{shared}\nYour earlier proposals (rollout {i + 1}):\n{own}" if own else shared)
        return View(shared, list(self.events), {"rollouts": rollouts})


@dataclass
class CoordinatorHistory:
    """M (AOrchestra): the coordinator's history holds only delegations and the sub-agents' reports
    (plus its own direct actions and the latest observation); sub-agents' inner steps stay with them."""
    report_chars: int = field(default=200, metadata={"help": "characters per sub-agent report"})
    max_records: int = field(default=8, metadata={"help": "most recent delegations shown"})

    def reset(self, ctx: Ctx) -> None:
        self.first = ""
        self.latest = ""
        self.direct: list[str] = []
        self.hidden = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        active = bool((ctx.state.get("subagent") or {}).get("active"))
        if event.kind in ("observation", "tool_result"):
            self.first = self.first or event.content
            self.latest = event.content
        if event.kind == "action":
            if event.data.get("agent") or active:
                self.hidden += 1
            else:
                self.direct.append(f"step {event.step}: {clip(event.content, 60)}")

    def view(self, ctx: Ctx) -> View:
        records = (ctx.state.get("delegations") or [])[-self.max_records:]
        lines = [f"Task start: {clip(self.first, 300)}"]
        if records:
            lines.append("Delegations so far:")
            for i, r in enumerate(records):
                report = clip(r.get("report") or "(running)", self.report_chars)
                lines.append(f"{i + 1}. [{', '.join(r.get('tools', []))}] {clip(r.get('instruction', ''), 80)} => {report}")
        if self.direct:
            lines.append("Direct actions: " + "; ".join(self.direct[-4:]))
        lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), [], {"delegations": len(records), "hidden_steps": self.hidden})
