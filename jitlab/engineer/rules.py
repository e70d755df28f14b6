"""The offline rule-patch teacher (``--engineer rules``): patches from failure kinds, no model needed.

    from jitlab.engineer.rules import propose_rules, rule_patch
    proposals = propose_rules(packet, k=4)       # [Proposal(name, text, note)], deterministic
    text = rule_patch({"block_after": 2})         # hooks.py text: class Hooks(RuleHooks) with those fields

Each rule is a field of jitlab.modules.hooks.RuleHooks. A rule's weight is how many failed episodes of the
packet show the failure kinds it answers (``RULES``); its parameter comes from the packet (``hint_after``:
half the failed episodes' mean step count; ``commit_margin`` only where the task has ``commit_answer``).
The K proposals are the heaviest single rules, then the heaviest rules together, on top of ``current``
(the rule fields of the patch kept so far), skipping duplicates and rules that nothing in the packet calls for.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "Proposal", "propose_rules", "rule_fields", "rule_patch"]


@dataclass
class Proposal:
    """One candidate patch: ``text`` is the hooks.py; ``note`` says why it was proposed."""
    name: str
    text: str
    note: str = ""
    reply: str = ""   # a model engineer's whole reply (the patch is extracted from it)


# rule field -> the failure kinds (jitlab.engineer.packets) it answers
RULES = {
    "block_after": ("refused", "repeated_action"),
    "loop_after": ("repeated_state",),
    "correct_invalid": ("refused",),
    "hint_after": ("no_reward",),
    "commit_margin": ("step_budget_end",),
}


def rule_patch(fields: dict, note: str = "") -> str:
    """The hooks.py text of a rule patch with ``fields`` set (deterministic: fields sorted)."""
    lines = [f"    {k}: {type(v).__name__} = {v!r}" for k, v in sorted(fields.items())] or ["    pass"]
    doc = f"Rule patch (jitlab engineer rules): {note or ', '.join(sorted(fields)) or 'no rule'}."
    return ('"""' + doc + '"""\nfrom dataclasses import dataclass\n\nfrom jitlab.modules.hooks import RuleHooks\n\n\n'
            "@dataclass\nclass Hooks(RuleHooks):\n" + "\n".join(lines) + "\n")


def rule_fields(text: str, names=RULES) -> dict:
    """The rule fields (``names``: default the RuleHooks rules) a patch's ``class Hooks`` sets ({} for none)."""
    import ast
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Hooks":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id in names:
                    try:
                        out[item.target.id] = ast.literal_eval(item.value)
                    except ValueError:
                        continue
    return out


def _parameter(rule: str, packet: dict) -> object | None:
    failures = packet.get("failures", [])
    if rule == "block_after":
        repeated = sum(f["kinds"].get("repeated_action", 0) for f in failures)
        return 1 if repeated >= 2 * max(1, len(failures)) else 2  # many repeats per episode: block at once
    if rule == "loop_after":
        return 3
    if rule == "correct_invalid":
        return True
    if rule == "hint_after":
        steps = [f["outcome"]["steps"] for f in failures] or [4]
        return max(2, round(sum(steps) / len(steps) / 2))
    if rule == "commit_margin":
        tools = {t["name"] for task in packet.get("tasks", {}).values() for t in task.get("tools", [])}
        return 1 if "commit_answer" in tools else None
    return None


def propose_rules(packet: dict, k: int = 4, current: dict | None = None) -> list[Proposal]:
    """Up to ``k`` rule patches for ``packet`` (see the module docstring), each on top of ``current``."""
    current = dict(current or {})
    counts = packet.get("failure_counts", {})
    weighted = []
    for rule, kinds in RULES.items():
        weight = max((counts.get(kind, 0) for kind in kinds), default=0)
        value = _parameter(rule, packet)
        if weight and value is not None and current.get(rule) != value:
            weighted.append((-weight, list(RULES).index(rule), rule, value))
    weighted.sort()
    options = [[(r, v)] for _, _, r, v in weighted]
    options += [[(r, v) for _, _, r, v in weighted[:n]] for n in range(2, len(weighted) + 1)]
    out, seen = [], set()
    for option in options:
        fields = {**current, **dict(option)}
        key = tuple(sorted(fields.items()))
        if key in seen:
            continue
        seen.add(key)
        note = " + ".join(f"{r}={v!r}" for r, v in option)
        why = ", ".join(f"{kind}: {counts.get(kind, 0)}" for r, _ in option for kind in RULES[r])
        out.append(Proposal(name="+".join(r for r, _ in option), text=rule_patch(fields, note), note=why))
        if len(out) == k:
            break
    return out
