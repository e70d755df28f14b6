"""memobrain memory: reasoning graph: fold finished sub-trajectories, flush low-value steps."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, is_failure, meaningful, render_prompt, user
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.memory.ReasoningGraphMemory
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


# ---- the harness's own code ----

class Memory(ReasoningGraphMemory):
    pass
