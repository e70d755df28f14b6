"""palimpsest planner: request -> DAG of sub-tasks (width <= 2 ready, depth <= 3)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, parse_subtasks, render_prompt, user
from jitlab.protocol import Ctx, Decision, Directive, Observation, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.planning.TaskDAG
class TaskDAG:
    """Subtasks with dependencies. ``ready()`` lists pending nodes whose dependencies are all done,
    in insertion order; ``order`` records completion order."""

    def __init__(self):
        self.nodes: dict[int, dict] = {}
        self.order: list[int] = []

    def add(self, text: str, deps: list[int] = ()) -> int:
        nid = len(self.nodes) + 1
        self.nodes[nid] = {"id": nid, "text": text, "deps": [d for d in deps if d in self.nodes], "status": "pending"}
        return nid

    def ready(self) -> list[dict]:
        return [n for n in self.nodes.values() if n["status"] == "pending"
                and all(self.nodes[d]["status"] == "done" for d in n["deps"])]

    def pending(self) -> list[dict]:
        return [n for n in self.nodes.values() if n["status"] == "pending"]

    def complete(self, nid: int) -> None:
        if nid in self.nodes and self.nodes[nid]["status"] == "pending":
            self.nodes[nid]["status"] = "done"
            self.order.append(nid)

    def drop_pending(self) -> None:
        for n in self.pending():
            n["status"] = "dropped"

    def add_plan(self, items: list[tuple[str, list[int]]]) -> list[int]:
        """Add parsed items (deps are 0-based indices into ``items``); returns the new ids."""
        ids: list[int] = []
        for text, deps in items:
            ids.append(self.add(text, [ids[d] for d in deps if d < len(ids)]))
        return ids


# library: jitlab.modules.planning._view_tail
def _view_tail(view: View, n: int = 800) -> str:
    return view.text[-n:]


# library: jitlab.modules.planning._FALLBACK
_FALLBACK = "make progress toward the task goal"


# library: jitlab.modules.planning.DAGPlanner
@dataclass
class DAGPlanner:
    """P (Flash-Searcher): a DAG of subtasks; every node whose dependencies are done is ready (several
    may run side by side); the remaining graph is revised every k steps."""
    max_nodes: int = field(default=6, metadata={"help": "subtasks per plan"})
    patience: int = field(default=2, metadata={"help": "env steps spent on a node before it counts as done without reward"})
    revise_every: int = field(default=6, metadata={"help": "revise the pending nodes every k steps (0: never)"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens per plan/revision call"})
    node_chars: int = field(default=80, metadata={"help": "characters per node"})

    def reset(self, ctx: Ctx) -> None:
        self.dag = TaskDAG()
        self.counts: dict[int, int] = {}
        self.last_plan_step = 0
        self.plans = 0
        self.exhausted_at = 0

    def _write(self, view: View, ctx: Ctx, kind: str) -> None:
        done = [n["text"] for n in self.dag.nodes.values() if n["status"] == "done"]
        prompt = render_prompt(ctx.prompts, kind, task=ctx.task.public(), view=_view_tail(view), done=done[-5:],
                               todo=[n["text"] for n in self.dag.pending()], max_items=self.max_nodes)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        items = [(clip(t, self.node_chars), d) for t, d in parse_subtasks(reply, self.max_nodes)]
        if items:
            self.dag.drop_pending()
            self.dag.add_plan(items)
        elif not self.dag.pending():
            self.dag.add(_FALLBACK)
        self.last_plan_step = ctx.step
        self.plans += 1

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if self.plans == 0:
            self._write(view, ctx, "dag")
        elif self.dag.pending() and self.revise_every and ctx.step - self.last_plan_step >= self.revise_every:
            self._write(view, ctx, "dag_revise")
        elif not self.dag.pending():
            # all done but the episode goes on: give the agent `patience` steps to finish, then replan
            self.exhausted_at = self.exhausted_at or ctx.step
            if ctx.step - self.exhausted_at >= self.patience:
                self._write(view, ctx, "dag_revise")
                self.exhausted_at = 0
        ready = self.dag.ready()
        ctx.state["plan_done"] = not ready
        done = [self.dag.nodes[i] for i in self.dag.order]
        text = "Ready sub-tasks: " + "; ".join(f"[{n['id']}] {n['text']}" for n in ready) if ready else \
            "All sub-tasks are done: finish the task."
        if done:
            text += "\nDone: " + "; ".join(f"[{n['id']}] {clip(n['text'], 40)}" for n in done[-4:])
        return Directive(text, {"ready": [{"id": n["id"], "text": n["text"]} for n in ready], "order": list(self.dag.order)})

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        ready = self.dag.ready()
        ids = {n["id"] for n in ready}
        nid = decision.data.get("node")
        nid = nid if nid in ids else (ready[0]["id"] if ready else None)
        if nid is None:
            return
        self.counts[nid] = self.counts.get(nid, 0) + 1
        if obs.reward > 0 or self.counts[nid] >= self.patience:
            self.dag.complete(nid)


# library: jitlab.modules.case_studies.BoundedDAGPlanner
@dataclass
class BoundedDAGPlanner(DAGPlanner):
    """P (Palimpsest bounded DAG): turns the request into a DAG of sub-tasks with bounded shape: dependency chains at
    most ``max_depth`` long (a deeper node hangs from shallower ancestors only) and at most ``max_width``
    nodes ready at once; each ready node carries its depth for the executor."""
    max_width: int = field(default=2, metadata={"help": "ready nodes offered at once"})
    max_depth: int = field(default=3, metadata={"help": "longest dependency chain kept"})

    def depth(self, nid: int) -> int:
        return 1 + max((self.depth(d) for d in self.dag.nodes[nid]["deps"]), default=0)

    def _write(self, view: View, ctx: Ctx, kind: str) -> None:
        super()._write(view, ctx, kind)
        for nid in sorted(self.dag.nodes):  # ids ascend with insertion, so deps are bounded before dependants
            node = self.dag.nodes[nid]
            node["deps"] = [d for d in node["deps"] if self.depth(d) < self.max_depth]
            node["depth"] = self.depth(nid)

    def plan(self, view: View, ctx: Ctx) -> Directive:
        directive = super().plan(view, ctx)
        ready = [{**n, "depth": self.dag.nodes[n["id"]].get("depth", 1)} for n in directive.data["ready"][: self.max_width]]
        lines = directive.text.split("\n")
        if len(directive.data["ready"]) > len(ready):  # the first line lists the ready nodes: only those offered
            lines[0] = "Ready sub-tasks: " + "; ".join(f"[{n['id']}] {n['text']}" for n in ready)
        text = "\n".join(lines)
        return Directive(text, {**directive.data, "ready": ready, "max_width": self.max_width, "max_depth": self.max_depth})


# ---- the harness's own code ----

class Planner(BoundedDAGPlanner):
    pass
