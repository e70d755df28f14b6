"""pegboard planner: coverage-driven directive; switch to verification."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, list_items, render_prompt, sections, tokens, user
from jitlab.protocol import Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies.MatrixCoveragePlanner
@dataclass
class MatrixCoveragePlanner:
    """P (Pegboard): one call lists the clues the answer must satisfy and the candidates; then matrix
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
            parts = sections(reply, ("clues", "candidates"))
            clues = list_items(parts.get("clues", ""), self.max_clues) or \
                [clip(s, 80) for s in re.split(r"(?<=[.?!])\s+", ctx.task.description) if len(tokens(s)) >= 2][: self.max_clues]
            ctx.state["clues"] = [clip(c, 60) for c in clues] or ["the answer"]
            ctx.state["matrix_candidates"] = [clip(c, 40) for c in list_items(parts.get("candidates", ""), self.max_candidates)]
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
