"""Fault injection into valid harnesses, for Stage II (repair) data: each operator breaks a known-good harness in one
way whose fix is known (the original file), and names the diagnostic kind validation should report.

    from jitlab.train.faults import CODE_FAULTS, PLAN_FAULTS, inject
    for fault in inject(files):                  # every operator that applies to these files
        fault.op, fault.kind, fault.broken, fault.touched, fault.fixed   # fixed: the original touched files

Code operators work on resolved harness files whose last statement is the role's own class (``class Action(...)``
after the inlined library code, as in the seeds and in rendered plans), so they add a buggy override or edit that
class rather than corrupting library code:

    drop_colon           parse_error          the role class's ``:`` removed (memory.py, action.py)
    yaml_flow            parse_error          prompt.yaml's ``system: |`` turned into an unclosed flow sequence
    rename_class         interface_mismatch   ``class Action`` renamed ``class Actor``
    missing_file         import_error         planning.py deleted (the fix restores it)
    import_missing       import_error         ``import`` of a module that does not exist, in memory.py
    raise_in_act         runtime_error        an ``act`` override reading a ``ctx.state`` key nobody wrote
    view_returns_str     runtime_error        a memory ``view`` override returning a str instead of a View
    prompt_key_missing   runtime_error        prompt.yaml's ``step:`` template renamed ``steps:``

Plan operators break a plan so that :func:`jitlab.jit.generate.plan.check_plan` refuses it (a ``parse_error`` for repair):
``unknown_module``, ``unknown_param``, ``param_type``, ``broken_coupling``.

Caveat: the runtime kinds only show in a smoke episode, which needs a backbone; the faults do not depend on its
replies, so the data builder runs them with a scripted test double and records so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.jit.generate.library import ROLES, option, requirements
from jitlab.jit.generate.plan import PlanError, check_plan

__all__ = ["CODE_FAULTS", "PLAN_FAULTS", "Fault", "inject", "inject_plan"]

_CLASS = {file: cls for file, cls, _, _ in ROLES.values()}


@dataclass
class Fault:
    """One injected fault: the broken files (or plan), the files it touched and their originals (the fix)."""
    op: str
    kind: str
    broken: dict = field(repr=False)
    touched: list
    fixed: dict = field(repr=False)
    note: str = ""


def _own_class_last(text: str, cls: str) -> re.Match | None:
    """The ``class <cls>(...):`` header when that class is the file's last top-level statement."""
    headers = list(re.finditer(rf"(?m)^class {cls}\((\w+)\):[ \t]*$", text))
    if not headers:
        return None
    last = headers[-1]
    tail = text[last.end():]
    return last if not re.search(r"(?m)^\S", tail) else None


def _append(text: str, body: str) -> str:
    return text.rstrip("\n") + "\n" + body


def _drop_colon(files, file):
    m = _own_class_last(files.get(file, ""), _CLASS[file])
    if m:
        text = files[file]
        return {file: text[:m.start()] + m.group(0).replace("):", ")", 1) + text[m.end():]}
    return None


def _rename_class(files, file):
    m = _own_class_last(files.get(file, ""), _CLASS[file])
    if m:
        text = files[file]
        return {file: text[:m.start()] + m.group(0).replace(f"class {_CLASS[file]}(", f"class {_CLASS[file]}Impl(")
                + text[m.end():]}
    return None


def _import_missing(files, file):
    text = files.get(file, "")
    if not _own_class_last(text, _CLASS[file]):
        return None
    future = re.search(r"(?m)^from __future__ import .*\n", text)
    at = future.end() if future else 0
    return {file: text[:at] + "import jitlab_helpers_missing\n" + text[at:]}


def _raise_in_act(files, file):
    if not _own_class_last(files.get(file, ""), _CLASS[file]):
        return None
    return {file: _append(files[file], "\n    def act(self, context, ctx):\n"
                                       "        return ctx.state[\"next_action\"]\n")}


def _view_returns_str(files, file):
    if not _own_class_last(files.get(file, ""), _CLASS[file]):
        return None
    return {file: _append(files[file], "\n    def view(self, ctx):\n        return \"the history so far\"\n")}


def _yaml_flow(files, file):
    text = files.get(file, "")
    return {file: text.replace("system: |", "system: [", 1)} if "system: |" in text else None


def _prompt_key_missing(files, file):
    text = files.get(file, "")
    return {file: re.sub(r"(?m)^step:", "steps:", text, count=1)} if re.search(r"(?m)^step:", text) else None


# op -> (expected diagnostic kind, file it touches, operator, note a repair would give)
CODE_FAULTS = {
    "drop_colon": ("parse_error", "action.py", _drop_colon, "restored the ':' of the class header"),
    "drop_colon_memory": ("parse_error", "memory.py", _drop_colon, "restored the ':' of the class header"),
    "yaml_flow": ("parse_error", "prompt.yaml", _yaml_flow, "made prompt.yaml's system entry a block scalar again"),
    "rename_class": ("interface_mismatch", "action.py", _rename_class, "named the class Action, as the protocol needs"),
    "missing_file": ("import_error", "planning.py", None, "wrote the missing planning.py"),
    "import_missing": ("import_error", "memory.py", _import_missing,
                       "removed the import of a module that does not exist"),
    "raise_in_act": ("runtime_error", "action.py", _raise_in_act,
                     "removed the act override that read a state key nobody writes"),
    "view_returns_str": ("runtime_error", "memory.py", _view_returns_str,
                         "removed the view override that returned a str instead of a View"),
    "prompt_key_missing": ("runtime_error", "prompt.yaml", _prompt_key_missing, "restored the prompt's step template"),
}


def inject(files: dict[str, str], ops=None) -> list[Fault]:
    """Every code fault of ``ops`` (default: all of CODE_FAULTS) that applies to ``files``."""
    out = []
    for op in ops or CODE_FAULTS:
        kind, file, fn, note = CODE_FAULTS[op]
        if file not in files:
            continue
        if fn is None:   # missing_file
            broken = {k: v for k, v in files.items() if k != file}
        else:
            change = fn(files, file)
            if change is None or change[file] == files[file]:
                continue
            broken = {**files, **change}
        out.append(Fault(op, kind, broken, [file], {file: files[file]}, note))
    return out


def _unknown_module(plan):
    return {**plan, "M": plan["M"] + "Memory" if not plan["M"].endswith("Memory") else plan["M"][:-6] + "Store"}


def _unknown_param(plan):
    params = {**plan.get("params", {})}
    params["A"] = {**params.get("A", {}), "max_tokens_per_step": 64}
    return {**plan, "params": params}


def _param_type(plan):
    params = {**plan.get("params", {})}
    params["A"] = {**params.get("A", {}), "max_new_tokens": "many"}
    return {**plan, "params": params}


def _broken_coupling(plan):
    for role in ROLES:
        opt = option(plan[role], role)
        need = requirements().get(opt.path, {}) if opt else {}
        if need:
            other = next(iter(need))
            basic = {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction"}[other]
            broken = {**plan, other: basic}
            broken.pop("params", None)
            return broken
    return None


PLAN_FAULTS = {
    "unknown_module": (_unknown_module, "named the memory module by its catalogue name"),
    "unknown_param": (_unknown_param, "dropped a parameter the action module does not have"),
    "param_type": (_param_type, "gave max_new_tokens an integer"),
    "broken_coupling": (_broken_coupling, "restored the module the coupled one needs"),
}


def inject_plan(plan: dict, ops=None) -> list[Fault]:
    """Every plan fault of ``ops`` (default: all of PLAN_FAULTS) that applies to ``plan``; ``broken``/``fixed`` hold
    the plans as {"plan": ...}."""
    out = []
    for op in ops or PLAN_FAULTS:
        fn, note = PLAN_FAULTS[op]
        broken = fn(plan)
        if broken is None or broken == plan:
            continue
        try:
            check_plan(broken)
        except PlanError:
            out.append(Fault(op, "parse_error", {"plan": broken}, ["plan"], {"plan": plan}, note))
    return out
