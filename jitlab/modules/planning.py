"""Planner modules (P): a view in, a local directive out.

    from jitlab.modules.planning import DAGPlanner
    class Planner(DAGPlanner): pass                 # in a harness folder's planning.py

Planners call the backbone rarely (once to plan, then every k steps or when the plan runs out) with
small ``max_new_tokens``. Progress is read in ``post_feedback`` (a lifecycle hook the runtime calls
on every module): a step with reward > 0 completes the current item; otherwise an item is given up
after ``patience`` steps, so a planner never stalls the episode. A reply that yields no list items
keeps the previous plan, or a one-item fallback plan.

``ctx.state`` keys written: ``subgoal`` (SubgoalPlanner), ``plan_done`` (DAGPlanner, RoadmapPlanner),
``subtask``/``context_results``/``results``/``aggregate`` (RecursiveDAGPlanner; RecursiveExecution
drains ``aggregate`` and writes aggregated results back into ``results``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.modules.basic import NoPlanner
from jitlab.modules.text import clip, list_items, parse_subtasks, render_prompt, sections, user
from jitlab.protocol import Ctx, Decision, Directive, Observation, View

__all__ = ["NoPlanner", "RoadmapPlanner", "TaskDAG", "DAGPlanner", "RecursiveDAGPlanner", "SubgoalPlanner"]

_FALLBACK = "make progress toward the task goal"


def _view_tail(view: View, n: int = 800) -> str:
    return view.text[-n:]


@dataclass
class RoadmapPlanner:
    """P (Plan-and-Execute): a linear roadmap written once, followed step by step, and rewritten
    every k steps or when it runs out."""
    max_items: int = field(default=5, metadata={"help": "plan steps kept"})
    patience: int = field(default=3, metadata={"help": "env steps spent on a plan step before moving on without reward"})
    replan_every: int = field(default=6, metadata={"help": "rewrite the remaining plan every k steps (0: only when it runs out)"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens per plan/replan call"})
    item_chars: int = field(default=80, metadata={"help": "characters per plan step"})

    def reset(self, ctx: Ctx) -> None:
        self.todo: list[str] = []
        self.done: list[str] = []
        self.count = 0
        self.last_plan_step = 0
        self.plans = 0

    def _write(self, view: View, ctx: Ctx, kind: str) -> None:
        prompt = render_prompt(ctx.prompts, kind, task=ctx.task.public(), view=_view_tail(view),
                               done=self.done[-5:], todo=self.todo, max_items=self.max_items)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        items = [clip(i, self.item_chars) for i in list_items(reply, self.max_items)]
        if items:
            self.todo, self.count = items, 0
        elif not self.todo:
            self.todo = [_FALLBACK]
        self.last_plan_step = ctx.step
        self.plans += 1

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if self.plans == 0:
            self._write(view, ctx, "plan")
        elif not self.todo or (self.replan_every and ctx.step - self.last_plan_step >= self.replan_every):
            self._write(view, ctx, "replan")
        ctx.state["plan_done"] = not self.todo
        current = self.todo[0] if self.todo else _FALLBACK
        later = "; ".join(self.todo[1:3])
        text = f"Plan step {len(self.done) + 1}: {current}" + (f" (then: {later})" if later else "")
        return Directive(text, {"current": current, "todo": list(self.todo), "done": list(self.done)})

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        if not self.todo:
            return
        self.count += 1
        if obs.reward > 0 or self.count >= self.patience:
            self.done.append(self.todo.pop(0))
            self.count = 0


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


_ATOMIC_RE = re.compile(r"\b(atomic|yes|simple|direct)\b", re.I)
_COMPLEX_RE = re.compile(r"\b(complex|no|decompose|split|plan)\b", re.I)


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


@dataclass
class SubgoalPlanner:
    """P (HiAgent): declare a subgoal, pursue it until it is reached (reward) or patience runs out,
    then declare the next one. The subgoal lives in ``ctx.state['subgoal']`` for the memory."""
    patience: int = field(default=3, metadata={"help": "env steps per subgoal before it is abandoned"})
    max_new_tokens: int = field(default=24, metadata={"help": "tokens per subgoal declaration"})
    subgoal_chars: int = field(default=80, metadata={"help": "characters per subgoal"})

    def reset(self, ctx: Ctx) -> None:
        self.declared = 0
        ctx.state.pop("subgoal", None)

    def declare(self, view: View, ctx: Ctx) -> dict:
        prompt = render_prompt(ctx.prompts, "subgoal", task=ctx.task.public(), view=_view_tail(view))
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        text = sections(reply, ("Subgoal",)).get("Subgoal", "")
        if not text:
            lines = [re.sub(r"^\s*(thought|action)\s*[:：]\s*", "", l, flags=re.I) for l in reply.splitlines() if l.strip()]
            text = lines[0] if lines and len(lines[0].split()) >= 2 else _FALLBACK
        self.declared += 1
        sg = {"id": self.declared, "text": clip(text, self.subgoal_chars), "start": ctx.step, "steps": 0, "done": False}
        ctx.state["subgoal"] = sg
        return sg

    def plan(self, view: View, ctx: Ctx) -> Directive:
        sg = ctx.state.get("subgoal")
        if not sg or sg.get("done"):
            sg = self.declare(view, ctx)
        return Directive(f"Current subgoal: {sg['text']}", dict(sg))

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        sg = ctx.state.get("subgoal")
        if not sg or sg.get("done"):
            return
        sg["steps"] += 1
        if obs.reward > 0 or sg["steps"] >= self.patience:
            sg["done"] = True
