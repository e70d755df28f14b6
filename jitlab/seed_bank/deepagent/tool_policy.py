"""deepagent capability policy: retrieval-based tool search."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import lexical_rank
from jitlab.protocol import Capability, Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.policy._latest_observation
def _latest_observation(view: View) -> str:
    obs = next((e.content for e in reversed(view.events) if e.kind in ("observation", "tool_result")), "")
    return obs or view.text[-400:]


# library: jitlab.modules.policy.ToolSearch
@dataclass
class ToolSearch:
    """F (DeepAgent tool search): rank the registry by relevance to the directive, the latest
    observation, the task and any query the action asked for (``ctx.state['tool_query']``); expose the top k."""
    top_k: int = field(default=3, metadata={"help": "tools exposed per step"})
    always: tuple = field(default=(), metadata={"help": "tool names always exposed (after the ranked ones)"})
    background_weight: float = field(default=0.1, metadata={"help": "weight of the task description in the ranking"})

    def reset(self, ctx: Ctx) -> None:
        self.last: list[str] = []

    def search(self, query: str, registry: list[Capability], k: int, background: str = "") -> list[Capability]:
        """The k tools most relevant to ``query``; ``background`` (the task description) only breaks
        near-ties. Stable: equal scores keep registry order."""
        docs = [f"{c.name.replace('_', ' ')} {c.description}" for c in registry]
        scores = [q + self.background_weight * b for q, b in zip(lexical_rank(query, docs), lexical_rank(background, docs), strict=True)]
        order = sorted(range(len(registry)), key=lambda i: -scores[i])
        return [registry[i] for i in order[:k]]

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        query = " ".join([str(ctx.state.get("tool_query", "")), directive.text, _latest_observation(view)[-300:]])
        chosen = self.search(query, list(registry), self.top_k, background=ctx.task.description)
        chosen += [c for c in registry if c.name in self.always and c not in chosen]
        self.last = [c.name for c in chosen]
        return chosen or list(registry)


# ---- the harness's own code ----

class CapabilityPolicy(ToolSearch):
    pass
