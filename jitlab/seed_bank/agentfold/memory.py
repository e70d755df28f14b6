"""agentfold memory: multi-scale folding (condense latest step / merge summaries)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.memory.MultiScaleFoldingMemory
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


# ---- the harness's own code ----

class Memory(MultiScaleFoldingMemory):
    pass
