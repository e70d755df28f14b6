"""gam memory: memos + page store searched on demand."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, lexical_rank, render_prompt, user
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.memory.MemoPageMemory
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


# ---- the harness's own code ----

class Memory(MemoPageMemory):
    pass
