"""The kind of a task: what the JIT reads its evidence per (retrieval, the bank's option evidence, known failures).

    from jitlab.jit.kind import task_kind
    task_kind(spec)                # "act(command)"                              a TextWorld-style game
    task_kind(spec.public())       # "act(command=turn left|turn right|...)"     a grid world's closed command set
                                   # "commit_answer(answer) execute_sql(sql)"    a SQL task

A kind is the task's tool signature, read from what the agent is given: each tool's name and argument names, sorted,
with an argument's closed set of values (a JSON-schema ``enum``) written out. It never reads the task's suite, family,
id or environment, so two suites whose tasks give the agent the same tools are one kind, and one suite whose tasks
differ in their tools is several. A stream of one suite is one kind (every task of TextWorld, BabyAI and DBBench gives
the same tools), so reading evidence per kind changes nothing there.

Caveats: the observation's form (whether it lists admissible commands) is not part of a kind, since the JIT chooses
before the first observation; two tasks with one tool signature and different observations are one kind.
"""
from __future__ import annotations

__all__ = ["task_kind"]


def _tools(task) -> list:
    if isinstance(task, dict):
        return list(task.get("tools") or ())
    return list(getattr(task, "tools", None) or ())


def _field(tool, name: str):
    return tool.get(name) if isinstance(tool, dict) else getattr(tool, name, None)


def _signature(tool) -> str:
    args = _field(tool, "args") or {}
    props = args.get("properties", {}) if isinstance(args, dict) else {}
    parts = []
    for arg in sorted(props):
        spec = props[arg] if isinstance(props[arg], dict) else {}
        values = spec.get("enum")
        parts.append(f"{arg}={'|'.join(map(str, values))}" if isinstance(values, list) and values else arg)
    return f"{_field(tool, 'name') or '?'}({', '.join(parts)})"


def task_kind(task) -> str:
    """The kind of ``task`` (a ``TaskSpec`` or its ``public()`` dict): its tools' signatures, sorted by name and
    joined by spaces (module docstring); ``"()"`` for a task that gives no tools."""
    return " ".join(sorted(_signature(t) for t in _tools(task))) or "()"
