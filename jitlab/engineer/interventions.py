"""Life-Harness interventions: recurring failure patterns of one backbone's trajectories, mined into a hooks overlay.

    from jitlab.engineer.interventions import mine, intervention_patch
    found = mine(["runs/tw-react-embedded"])        # Interventions(fields, evidence)
    text = intervention_patch(found)                 # hooks.py: class Hooks(InterventionHooks) with the fields
    jitlab engineer mine runs/tw-react-embedded --out hooks.py

What is mined (from the step records, with the failure marks of jitlab.engineer.packets):

    refused steps           -> correct_invalid + normalise (the output interceptor)
    repeated actions        -> block_after=1 and rerank="untried" (re-rank the admissible set, untried first)
    repeated states         -> loop_after=3
    verbs of rewarded steps -> prefer: (verb, log((rewarded+1)/(refused+1))) for verbs seen MIN_COUNT+ times,
                               the rules learned from successes, added to the likelihood when re-ranking

A pattern becomes an intervention when its share of steps reaches ``threshold``. The result is an ordinary
``hooks.py`` (jitlab.modules.hooks.InterventionHooks fields, resolvable like any library code), so it applies
to any harness and any backbone unchanged; its docstring records what it was mined from (backbones, runs,
counts). Re-ranking needs ``Backbone.score``; litellm backbones have none (most providers return logprobs
only for generated tokens, not for given candidate text), so there the hook asks the backbone by chat to
pick a numbered command, and records ``rerank:chat`` in the step trace.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from jitlab.engineer.packets import _action, step_marks
from jitlab.fields import check_number
from jitlab.store import load

__all__ = ["MIN_COUNT", "Interventions", "intervention_patch", "mine"]

MIN_COUNT = 2


@dataclass
class Interventions:
    """Mined InterventionHooks fields and the evidence behind them."""
    fields: dict
    evidence: dict = field(default_factory=dict)


def _verb(action: str) -> str:
    words = action.split()
    return words[0].lower() if words else ""


def mine(run_dirs: list[str | Path], threshold: float = 0.1) -> Interventions:
    """Interventions from the finished episodes of ``run_dirs`` (one backbone's runs; see the module docstring)."""
    check_number("--threshold", threshold, "float", min=0.0, max=1.0)  # a share of steps
    steps_n, marks_n, good, bad = 0, Counter(), Counter(), Counter()
    backbones, episodes = set(), 0
    for run_dir in run_dirs:
        frames = load(run_dir)
        config = frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}
        backbones.add(str(config.get("backbone")))
        eps = frames["episodes"]
        final = set(eps[eps["final"]]["id"].astype(int))
        episodes += len(final)
        steps = frames["steps"].sort_values(["episode_id", "step"])
        for episode_id, group in steps.groupby("episode_id"):
            if int(episode_id) not in final:
                continue
            records = [{"tool": r.tool, "args": json.loads(r.args or "{}"), "observation": r.observation,
                        "reward": r.reward} for r in group.itertuples()]
            for record, marks in zip(records, step_marks(records)):
                steps_n += 1
                marks_n.update(marks)
                verb = _verb(_action(record["tool"], record["args"]))
                if (record["reward"] or 0) > 0:
                    good[verb] += 1
                elif "refused" in marks:
                    bad[verb] += 1
    share = {k: round(marks_n[k] / steps_n, 4) if steps_n else 0.0
             for k in ("refused", "repeated_action", "repeated_state")}
    fields = {}
    if share["refused"] >= threshold:
        fields |= {"correct_invalid": True, "normalise": True}
    if share["repeated_action"] >= threshold:
        fields |= {"block_after": 1, "rerank": "untried"}
    if share["repeated_state"] >= threshold:
        fields["loop_after"] = 3
    prefer = sorted((v, round(math.log((good[v] + 1) / (bad[v] + 1)), 2)) for v in set(good) | set(bad)
                    if v and good[v] + bad[v] >= MIN_COUNT)
    prefer = [p for p in prefer if p[1]]
    if prefer:
        fields["prefer"] = tuple(sorted(prefer, key=lambda p: (-abs(p[1]), p[0]))[:8])
    evidence = {"backbones": sorted(backbones), "runs": [Path(r).name for r in run_dirs], "episodes": episodes,
                "steps": steps_n, "share": share, "rewarded_verbs": dict(sorted(good.items())),
                "refused_verbs": dict(sorted(bad.items()))}
    return Interventions(fields, evidence)


def intervention_patch(found: Interventions) -> str:
    """The hooks.py text of ``found`` (deterministic: fields sorted)."""
    lines = [f"    {k}: {type(v).__name__} = {v!r}" for k, v in sorted(found.fields.items())] or ["    pass"]
    ev = found.evidence
    doc = (f"Interventions mined by jitlab.engineer.interventions from {ev.get('episodes', 0)} episodes "
           f"({ev.get('steps', 0)} steps) of {', '.join(ev.get('backbones', [])) or '?'}.\n\n"
           f"Step shares: {json.dumps(ev.get('share', {}), sort_keys=True)}\n")
    return ('"""' + doc + '"""\nfrom dataclasses import dataclass\n\nfrom jitlab.modules.hooks import InterventionHooks\n'
            "\n\n@dataclass\nclass Hooks(InterventionHooks):\n" + "\n".join(lines) + "\n")
