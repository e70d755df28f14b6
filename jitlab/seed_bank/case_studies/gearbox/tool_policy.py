"""gearbox capability policy: tools per phase (answer tools in the answer phase only)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.protocol import Capability, Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies._ANSWER_TOOLS
_ANSWER_TOOLS = "commit_answer,answer,finish,submit"


# library: jitlab.modules.case_studies._names
def _names(csv: str) -> list[str]:
    return [n.strip() for n in str(csv).split(",") if n.strip()]


# library: jitlab.modules.case_studies.PhaseToolPolicy
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


# ---- the harness's own code ----

class CapabilityPolicy(PhaseToolPolicy):
    pass
