"""Random baseline action: a uniformly random admissible command; never calls the backbone."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from jitlab.protocol import Capability, Context, Ctx, Decision

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.basic._single_text_tool
def _single_text_tool(caps: list[Capability]) -> Capability | None:
    """A tool whose only argument is a string (text-game style ``act(command)``)."""
    for cap in caps:
        props = cap.args.get("properties", {})
        if len(props) == 1 and next(iter(props.values())).get("type") == "string":
            return cap
    return None


# library: jitlab.modules.basic.RandomAction
@dataclass
class RandomAction:
    """A: a uniformly random admissible command (seeded by task and step); a baseline, no backbone."""
    seed: int = field(default=0, metadata={"help": "added to the per-task seed"})

    def reset(self, ctx: Ctx) -> None:
        self.rng = random.Random(f"{ctx.task.id}:{self.seed}")

    def act(self, context: Context, ctx: Ctx) -> Decision:
        candidates = context.observation.candidates
        if candidates:
            text_tool = _single_text_tool(context.capabilities)
            arg = next(iter(text_tool.args["properties"])) if text_tool else "command"
            return Decision(text_tool.name if text_tool else "act", {arg: self.rng.choice(candidates)}, "random")
        cap = self.rng.choice(context.capabilities)
        return Decision(cap.name, {k: "" for k in cap.args.get("properties", {})}, "random")


# ---- the harness's own code ----

class Action(RandomAction):
    pass
