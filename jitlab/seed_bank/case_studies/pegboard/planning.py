"""pegboard planner: coverage-driven directive; switch to verification."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, list_items, render_prompt, tokens, user
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


# library: jitlab.modules.case_studies.MatrixCoveragePlanner
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


# ---- the harness's own code ----

class Planner(MatrixCoveragePlanner):
    pass
