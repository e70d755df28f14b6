"""roma planner: atomizer + recursive DAG decomposition (depth <= 3)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, parse_subtasks, render_prompt, user
from jitlab.protocol import Ctx, Decision, Directive, Observation, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.planning._ATOMIC_RE
_ATOMIC_RE = re.compile(r"\b(atomic|yes|simple|direct)\b", re.I)


# library: jitlab.modules.planning._COMPLEX_RE
_COMPLEX_RE = re.compile(r"\b(complex|no|decompose|split|plan)\b", re.I)


# library: jitlab.modules.planning.RecursiveDAGPlanner
@dataclass
class RecursiveDAGPlanner:
    """P (ROMA): an atomizer decides whether a goal is atomic; non-atomic goals are decomposed into a
    DAG of subgoals, recursively (depth <= max_depth). Leaves run in dependency order; when all
    children of a node finish, the node is queued for aggregation upward."""
    max_depth: int = field(default=3, metadata={"help": "deepest decomposition level (root is 0)"})
    max_nodes: int = field(default=8, metadata={"help": "nodes in the whole tree (bounds backbone calls)"})
    max_children: int = field(default=3, metadata={"help": "subgoals per decomposition"})
    patience: int = field(default=3, metadata={"help": "env steps spent on a leaf before it counts as done without reward"})
    atomize_tokens: int = field(default=6, metadata={"help": "tokens for the atomizer's verdict"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens per decomposition"})
    node_chars: int = field(default=100, metadata={"help": "characters per node goal"})

    def reset(self, ctx: Ctx) -> None:
        self.nodes: dict[str, dict] = {}
        self.current: str | None = None
        ctx.state.setdefault("results", {})
        ctx.state.setdefault("aggregate", [])

    def _node(self, nid: str, goal: str, depth: int, parent: str | None, deps: list[str]) -> dict:
        node = {"id": nid, "goal": clip(goal, self.node_chars), "depth": depth, "parent": parent, "deps": deps,
                "children": [], "status": "pending", "atomic": None, "steps": 0}
        self.nodes[nid] = node
        return node

    def _atomic(self, node: dict, ctx: Ctx) -> bool:
        if node["depth"] >= self.max_depth or len(self.nodes) + 2 > self.max_nodes:
            return True
        prompt = render_prompt(ctx.prompts, "atomize", task=ctx.task.public(), goal=node["goal"], depth=node["depth"])
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.atomize_tokens).text
        head = " ".join(reply.split()[:4])
        if _ATOMIC_RE.search(head):
            return True
        if _COMPLEX_RE.search(head):
            return False
        return node["depth"] >= 1      # unreadable verdict: try one decomposition of the root only

    def _expand(self, node: dict, ctx: Ctx) -> None:
        node["atomic"] = self._atomic(node, ctx)
        if node["atomic"]:
            return
        prompt = render_prompt(ctx.prompts, "decompose", task=ctx.task.public(), goal=node["goal"],
                               max_items=self.max_children)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        items = parse_subtasks(reply, self.max_children)
        if len(items) < 2:
            node["atomic"] = True
            return
        ids: list[str] = []
        for i, (goal, deps) in enumerate(items):
            cid = f"{node['id']}.{i + 1}"
            self._node(cid, goal, node["depth"] + 1, node["id"], [ids[d] for d in deps])
            ids.append(cid)
        node["children"] = ids

    def _next_leaf(self, nid: str, ctx: Ctx) -> str | None:
        node = self.nodes[nid]
        if node["status"] == "done":
            return None
        if node["atomic"] is None:
            self._expand(node, ctx)
        if node["atomic"]:
            return nid
        for cid in node["children"]:
            child = self.nodes[cid]
            if child["status"] == "pending" and all(self.nodes[d]["status"] == "done" for d in child["deps"]):
                leaf = self._next_leaf(cid, ctx)
                if leaf:
                    return leaf
        if all(self.nodes[c]["status"] == "done" for c in node["children"]):
            self._finish_parent(node, ctx)
        return None

    def _finish_parent(self, node: dict, ctx: Ctx) -> None:
        children = [{"goal": self.nodes[c]["goal"], "result": ctx.state["results"].get(c, "")} for c in node["children"]]
        node["status"] = "done"
        # a heuristic result now; RecursiveExecution replaces it with an aggregated one
        ctx.state["results"][node["id"]] = clip("; ".join(f"{c['goal']}: {c['result']}" for c in children), 300)
        ctx.state["aggregate"].append({"id": node["id"], "goal": node["goal"], "children": children})

    def _advance(self, ctx: Ctx) -> None:
        if not self.nodes:
            # the concrete goal is usually in the first observation; the description is generic per suite
            root = self._node("0", "", 0, None, [])
            root["goal"] = clip(ctx.state.get("first_observation") or ctx.task.description, 200)
        leaf = self._next_leaf("0", ctx)
        if leaf is None:
            # the tree is finished but the episode is not: one more atomic leaf under the root
            n = len([k for k in self.nodes if k.startswith("0.f")]) + 1
            node = self._node(f"0.f{n}", "finish the task using the results so far", 1, "0", [])
            node["atomic"] = True
            leaf = node["id"]
        self.current = leaf
        node = self.nodes[leaf]
        inputs = {}
        extra = ["0"] if leaf.startswith("0.f") else []      # a finishing leaf gets the whole tree's result
        for nid in node["deps"] + self._ancestor_deps(node) + extra:
            inputs[self.nodes[nid]["goal"]] = ctx.state["results"].get(nid, "")
        ctx.state["subtask"] = leaf
        ctx.state["context_results"] = inputs

    def _ancestor_deps(self, node: dict) -> list[str]:
        out, parent = [], node["parent"]
        while parent is not None:
            out += self.nodes[parent]["deps"]
            parent = self.nodes[parent]["parent"]
        return out

    def on_init(self, ctx: Ctx, obs: Observation) -> None:
        ctx.state["first_observation"] = clip(obs.text, 200)

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if self.current is None:
            self._advance(ctx)
        node = self.nodes[self.current]
        path, parent = [], node["parent"]
        while parent is not None:
            path.insert(0, self.nodes[parent]["goal"])
            parent = self.nodes[parent]["parent"]
        text = f"Sub-task {node['id']} (depth {node['depth']}): {node['goal']}"
        if path and node["depth"] > 1:
            text += f"\nIt serves: {clip(path[-1], 80)}"
        return Directive(text, {"node": node["id"], "depth": node["depth"],
                                "tree": {k: {"goal": v["goal"], "status": v["status"], "children": list(v["children"])}
                                         for k, v in self.nodes.items()}})

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        if self.current is None:
            return
        node = self.nodes[self.current]
        node["steps"] += 1
        if obs.reward > 0 or node["steps"] >= self.patience:
            node["status"] = "done"
            action = decision.args.get("command") or next(iter(decision.args.values()), decision.tool)
            ctx.state["results"][node["id"]] = clip(f"{action} -> {obs.text}", 160)
            self.current = None
            if not obs.done:
                self._advance(ctx)


# ---- the harness's own code ----

class Planner(RecursiveDAGPlanner):
    pass
