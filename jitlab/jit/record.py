"""The typed record of one JIT task: what ``jitlab jit`` writes in ``episodes.extra`` (docs/records.md), read back
by one function for the summaries, figures, dashboards and experiment helpers.

    from jitlab.jit.record import read_jit_record
    rec = read_jit_record(episode_row["extra"])      # a JSON string, a dict or None
    rec.mode, rec.exec_tokens, rec.nearest_reference, rec.repaired

Every field is None when the episode did not record it (a fixed-harness run records ``{}``; older JIT runs
lack the newer keys), so a reader tells "not recorded" from 0. Keys this version does not know are kept in
``other``; a value that is not a JSON object reads as an empty record.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

__all__ = ["JITTaskRecord", "read_jit_record"]


@dataclass
class JITTaskRecord:
    mode: str | None = field(default=None, metadata={"help": "static | streaming (None: not a JIT episode)"})
    stream_index: int | None = field(default=None, metadata={"help": "position of the task in the stream"})
    generator: str | None = field(default=None, metadata={"help": "the run's generator (compose | code:<backbone>)"})
    harness_generator: str | None = field(default=None, metadata={"help": "what made the harness that ran ('bank': "
                                                                          "a fallback to a reference)"})
    gen_tokens: int | None = field(default=None, metadata={"help": "tokens of the generate phase"})
    select_tokens: int | None = field(default=None, metadata={"help": "tokens of the select phase (judge, smoke runs)"})
    repair_tokens: int | None = field(default=None, metadata={"help": "tokens of the repair phase"})
    exec_tokens: int | None = field(default=None, metadata={"help": "tokens of the task episode itself"})
    gen_cost: float | None = field(default=None, metadata={"help": "USD of the generate phase"})
    select_cost: float | None = field(default=None, metadata={"help": "USD of the select phase"})
    repair_cost: float | None = field(default=None, metadata={"help": "USD of the repair phase"})
    exec_cost: float | None = field(default=None, metadata={"help": "USD of the task episode"})
    repair_rounds: int | None = field(default=None, metadata={"help": "repair rounds used"})
    n_candidates: int | None = field(default=None, metadata={"help": "candidates generated"})
    valid_candidates: int | None = field(default=None, metadata={"help": "candidates valid at the first check"})
    novelty_rejected: int | None = field(default=None, metadata={"help": "candidates rejected before validation as "
                                                                         "the design of an earlier candidate of the "
                                                                         "task or of a harness that failed on its "
                                                                         "family (jit.novelty lists them)"})
    fallback: bool | None = field(default=None, metadata={"help": "the nearest reference ran instead"})
    harness_dir: str | None = field(default=None, metadata={"help": "harnesses/<sha>, relative to the run directory"})
    harness_name: str | None = field(default=None, metadata={"help": "name of the harness that ran"})
    modules: dict | None = field(default=None, metadata={"help": "{M, P, F, A: module:Class}: the library class each "
                                                                 "role of the harness that ran derives from (None: none)"})
    parents: list | None = field(default=None, metadata={"help": "shas the harness was derived from"})
    prompt_hash: str | None = field(default=None, metadata={"help": "hash of the generation prompt"})
    references: list | None = field(default=None, metadata={"help": "shas retrieved from the bank, best first"})
    nearest_reference: str | None = field(default=None, metadata={"help": "sha of the best reference"})
    reference_names: list | None = field(default=None, metadata={"help": "names of the references"})
    bank_size_before: int | None = field(default=None, metadata={"help": "bank entries before the task"})
    choose_s: float | None = field(default=None, metadata={"help": "seconds spent choosing the harness"})
    jit: dict | None = field(default=None, metadata={"help": "selector, candidates, repair transitions, "
                                                             "fallback_reason, avoided, novelty"})
    time: dict | None = field(default=None, metadata={"help": "where the episode's time went (jitlab/timing.py; every "
                                                              "episode has it)"})
    bank_size_after: int | None = field(default=None, metadata={"help": "bank entries after its update"})
    frontier: list | None = field(default=None, metadata={"help": "the Pareto frontier (shas) after the task"})
    bank_update: dict | None = field(default=None, metadata={"help": "entered_frontier, on_frontier, removed, "
                                                                     "dominated_by"})
    other: dict = field(default_factory=dict, metadata={"help": "recorded keys this version does not know"})

    @property
    def candidates(self) -> list[dict]:
        return (self.jit or {}).get("candidates") or []

    @property
    def repaired(self) -> bool:
        """A repair round fixed the candidate that ran."""
        return any(t.get("outcome") == "fixed" for t in (self.jit or {}).get("repair") or [])

    def as_dict(self, nulls: tuple = ()) -> dict:
        """The recorded keys (those that are set, and those named in ``nulls`` even when None) as ``extra`` holds
        them, in field order."""
        out = {k: v for k, v in asdict(self).items() if (v is not None or k in nulls) and k != "other"}
        return {**out, **self.other}


_NAMES = {f.name for f in fields(JITTaskRecord)} - {"other"}


def read_jit_record(extra) -> JITTaskRecord:
    """The record of one episode's ``extra`` (a JSON string, an already parsed dict, or None)."""
    if isinstance(extra, str):
        try:
            extra = json.loads(extra) if extra else {}
        except json.JSONDecodeError:
            extra = {}
    if not isinstance(extra, dict):
        extra = {}
    return JITTaskRecord(**{k: v for k, v in extra.items() if k in _NAMES},
                         other={k: v for k, v in extra.items() if k not in _NAMES})
