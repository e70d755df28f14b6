"""turnstile planner: specification + evidence checklist."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, list_items, render_prompt, sections, user
from jitlab.protocol import Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies._section_list
def _section_list(text: str, label: str, labels: tuple[str, ...], max_items: int) -> list[str]:
    """The list items under ``label:`` up to the next of ``labels`` (``sections`` joins lines, losing the list)."""
    heads = list(re.finditer(r"^[\s>*#\-]*\**\s*(" + "|".join(labels) + r")\w*\**\s*[:：]", str(text), re.I | re.M))
    for i, m in enumerate(heads):
        if m.group(1).lower() == label:
            return list_items(text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)], max_items)
    return []


# library: jitlab.modules.case_studies.SpecChecklistPlanner
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


# ---- the harness's own code ----

class Planner(SpecChecklistPlanner):
    pass
