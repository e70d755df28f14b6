"""Compliance of a backbone with its harness, per step: did the model's reply parse, did it name an admissible
action, and did realisation or a hook change what it named (weak models often do not follow a harness at all).

The convention an Action follows (``Decision.data``):

- ``decided_by``: ``"model_reply"`` (the model's free reply, parsed), ``"model_choice"`` (the model chose among
  candidates, e.g. by likelihood) or ``"mechanism"`` (code overrode the model; ``data["mechanism"]`` names it);
- ``parsed`` (bool): whether the reply parsed in the harness's format (e.g. ReAct: an ``Action:`` line);
- ``raw_action`` (str): what the model named before realisation mapped it onto an admissible command
  (``jitlab.modules.basic.to_decision`` sets it).

The runtime (``run_episode``, the trusted side) turns that into one record per step, :func:`step_record`, stored
in the step row's ``compliance`` column: ``decided_by`` defaults to "model_reply" when the step made a chat call,
"model_choice" when it only scored candidates and "mechanism" (``no backbone call``) when it made none;
``parsed`` stays None (unknown) when the action did not say; ``gap``, only where the action reported one (the
likelihood choice's ``data["choice"]["gap"]``, jitlab/modules/likelihood.py), is the backbone's lead over the
runner-up, so the margin a harness could set can be read from a run; a pre_action hook that changed the decision
marks it "mechanism" (``HarnessAgent.decide`` compares the decision before and after). ``admissible`` is checked here
against the observation the agent was given, never taken from the harness: the named command is one of the
listed candidates (text games), or the decision names one of the task's tools (DBBench); None when neither
applies. A sandboxed harness reports ``decided_by`` / ``parsed`` itself; ``admissible`` is still the runtime's.

:func:`compliance_by_step` gives the shares by step index and :func:`compliance_summary` the per-run shares
(summary.json ``compliance``, ``jitlab show RUN --compliance``, notebook 08).
"""
from __future__ import annotations

import json
import math
import warnings

from jitlab.harnesskit import normalize

__all__ = ["DECIDERS", "compliance_by_step", "compliance_summary", "step_record", "steps_compliance"]

_SAID: set[str] = set()   # the damaged-record warnings already given
DECIDERS = ("model_reply", "model_choice", "mechanism")


def step_record(decision, obs, task, chat_calls: int, score_calls: int) -> dict:
    """The compliance record of one step: ``decision`` taken on observation ``obs`` of ``task``, with the chat
    and scoring calls the step made."""
    data = decision.data if isinstance(decision.data, dict) else {}
    default = "model_reply" if chat_calls else "model_choice" if score_calls else "mechanism"
    decided_by = data.get("decided_by") if data.get("decided_by") in DECIDERS else default
    mechanism = data.get("mechanism") or (None if decided_by != "mechanism" else
                                          "no backbone call" if not (chat_calls or score_calls) else "unnamed")
    mechanism = None if mechanism is None else str(mechanism)[:120]  # a sandboxed harness reports it: kept short
    parsed = data.get("parsed") if isinstance(data.get("parsed"), bool) else None
    command = decision.args.get("command") if set(decision.args) == {"command"} else None
    raw = data.get("raw_action")
    named = raw if isinstance(raw, str) else command
    candidates = {normalize(c) for c in (getattr(obs, "candidates", None) or [])}
    if command is not None and candidates:
        admissible = normalize(named) in candidates
    elif task is not None and task.tools and command is None:
        admissible = decision.tool in {t.name for t in task.tools}
    else:
        admissible = None
    realised = bool(command is not None and isinstance(raw, str) and normalize(raw) != normalize(command))
    record = {"decided_by": str(decided_by), "mechanism": mechanism, "parsed": parsed, "admissible": admissible,
              "realised": realised, "hooked": bool(data.get("hooked"))}
    choice = data.get("choice")
    gap = choice.get("gap") if isinstance(choice, dict) else None
    if isinstance(gap, (int, float)) and not isinstance(gap, bool) and math.isfinite(gap):
        record["gap"] = round(float(gap), 3)
    return record


def steps_compliance(steps, episodes=None):
    """The compliance records of a steps DataFrame (``jitlab.store.load(run)["steps"]``) as columns
    (step, decided_by, mechanism, parsed, admissible, realised, hooked, gap: NaN where none was reported); empty
    when none were recorded. With ``episodes`` (``load(run)["episodes"]``), only the steps of finished episodes
    (no retried or running attempt)."""
    import pandas as pd
    cols = ["episode_id", "step", "decided_by", "mechanism", "parsed", "admissible", "realised", "hooked", "gap"]
    if "compliance" not in steps:
        return pd.DataFrame(columns=cols)
    if episodes is not None:
        steps = steps[steps["episode_id"].isin(episodes.loc[episodes["final"], "id"])]
    rows, damaged = [], []
    for episode_id, step, text in zip(steps["episode_id"], steps["step"], steps["compliance"]):
        if isinstance(text, str) and text:
            try:
                record = json.loads(text)
            except ValueError:
                record = None
            if not isinstance(record, dict):   # a damaged record: left out of every share, said once
                damaged.append(f"episode {episode_id} step {step}")
                continue
            rows.append({**record, "episode_id": int(episode_id), "step": int(step)})
    message = (f"{len(damaged)} step compliance record(s) are not JSON mappings (damaged; e.g. {damaged[0]}) and "
               "are left out of the compliance shares") if damaged else None
    if message and message not in _SAID:   # once per process: a command reads the same steps several times
        _SAID.add(message)
        warnings.warn(message, stacklevel=2)
    frame = pd.DataFrame(rows, columns=cols)
    frame["gap"] = pd.to_numeric(frame["gap"], errors="coerce")
    return frame


def _shares(frame) -> dict:
    def share(col):
        known = frame[col].dropna()
        return float(known.astype(bool).mean()) if len(known) else None
    out = {"n_steps": int(len(frame)), "parsed": share("parsed"), "admissible": share("admissible"),
           "realised": share("realised"), "hooked": share("hooked")}
    out.update({f"decided_by_{d}": float((frame["decided_by"] == d).mean()) if len(frame) else None for d in DECIDERS})
    return out


def compliance_by_step(steps, episodes=None, max_step: int | None = None):
    """Shares per step index (one row per step: n_steps, parsed, admissible, realised, hooked and the
    decided_by shares). A share is over the steps where it is known (``parsed`` None is left out). ``episodes``:
    as in :func:`steps_compliance`."""
    return _by_step(steps_compliance(steps, episodes), max_step)


def _by_step(records, max_step: int | None = None):
    """:func:`compliance_by_step` of the records :func:`steps_compliance` gave."""
    import pandas as pd
    if max_step is not None:
        records = records[records["step"] <= max_step]
    rows = [{"step": int(step), **_shares(group)} for step, group in records.groupby("step")]
    return pd.DataFrame(rows)


def compliance_summary(steps, episodes=None) -> dict | None:
    """The per-run shares (all steps; with ``episodes``, those of finished episodes) and the same by step index;
    None when no step recorded compliance."""
    records = steps_compliance(steps, episodes)
    if not len(records):
        return None
    return {**_shares(records), "by_step": _by_step(records).to_dict(orient="records")}
