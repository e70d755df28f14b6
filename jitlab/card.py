"""Harness cards: the short record beside every number that says what produced it.

A card names the harness (name and sha), its modules and hooks, the backbone and its decoding settings, the step,
token and wall budgets, the suite, split, suite version and a hash of the task list, the jitlab commit that ran it
and the share of backbone calls the replay cache answered; a mix's card also counts its tasks per source suite
(``tasks_by_suite``). ``jitlab export`` writes it as ``card.json`` in every export; ``jitlab figures`` and ``jitlab
compare`` print the cards of the runs they draw.

    card = jitlab.card.read_card("results/full-budget-textworld-test/textworld-react")
    print(jitlab.card.format_card(card))

A run directory, or an export made before cards existed, has no ``card.json``: :func:`read_card` computes the card
from its records (config, meta, episodes, calls). What those records do not hold is ``None`` and is named in
``card["unknown"]``: runs started before the jitlab commit and the suite version were recorded (meta) lack them.
Modules and hooks of a fixed harness come from its folder (seed name or path) when that folder still has the run's
sha; of a JIT run, from each episode's chosen modules (``extra["modules"]``).
"""
from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path

from jitlab.envs.base import MIX_PREFIX
from jitlab.envs.mix import source_of
from jitlab.errors import JitlabError
from jitlab.harness import describe_files, harness_sha, read_files, resolve
from jitlab.store import load

__all__ = ["CARD_NAME", "compute_card", "format_card", "read_card", "task_list_hash"]

CARD_NAME = "card.json"
_HOOK_DEF = re.compile(r"^\s+def (on_init|pre_decision|pre_action|post_feedback)\(", re.M)


def task_list_hash(task_ids) -> str:
    """sha256 (16 hex digits) of the sorted, distinct task ids: equal hashes mean the same task list."""
    return hashlib.sha256("\n".join(sorted(set(map(str, task_ids)))).encode()).hexdigest()[:16]


def _fixed_harness(name: str, shas: list[str]) -> dict:
    """Modules (description.yaml's M/P/F/A labels) and hooks of a fixed harness whose folder still has the run's sha."""
    try:
        folder = resolve(name)
        files = read_files(folder)
    except (JitlabError, OSError):
        return {"modules": None, "hooks": None, "modules_from": f"unknown: no harness folder {name!r} here"}
    if shas != [harness_sha(files)]:
        return {"modules": None, "hooks": None, "modules_from": f"unknown: {folder} has changed since the run (sha)"}
    modules = describe_files(files).get("modules")   # aliases refused: a YAML bomb is not expanded here
    if not isinstance(modules, dict):
        return {"modules": None, "hooks": None,
                "modules_from": f"unknown: {folder.name}/description.yaml does not parse to a mapping of modules"}
    return {"modules": {str(k): str(v) for k, v in modules.items()},
            "hooks": sorted(set(_HOOK_DEF.findall(files.get("hooks.py", "")))),
            "modules_from": f"{folder.name}/description.yaml (sha matches the run)"}


def _jit_harnesses(extras) -> dict:
    """Modules of a JIT run: each distinct M/P/F/A choice of its episodes with the number of tasks that ran it."""
    counts: dict[str, int] = {}
    for extra in extras:
        modules = extra.get("modules") or {}
        key = ", ".join(f"{s}={str(modules.get(s, '?')).rpartition(':')[2]}" for s in "MPFA") if modules else "?"
        counts[key] = counts.get(key, 0) + 1
    return {"modules": dict(sorted(counts.items(), key=lambda kv: -kv[1])), "hooks": None,
            "modules_from": "episodes' chosen harnesses (tasks per M/P/F/A choice)"}


def compute_card(frames: dict) -> dict:
    """The card of a run from its loaded records (:func:`jitlab.store.load`)."""
    config = frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}
    meta = frames.get("meta") or {}
    eps = frames["episodes"]
    done = eps[eps["final"]]
    shas = sorted(set(done["harness_sha"].dropna().astype(str)))
    extras = [json.loads(x) if isinstance(x, str) and x else {} for x in done["extra"]]
    jit = any(e.get("mode") for e in extras) or str(config.get("harness", "")).startswith("jit-")
    harness = str(config.get("harness"))
    about = _jit_harnesses(extras) if jit else _fixed_harness(harness, shas)
    calls = frames["calls"]
    n_calls = calls["n_calls"] if "n_calls" in calls else calls["cached"].map(lambda _: 1)  # an export aggregates
    total = int(n_calls.sum())
    options = config.get("backbone_options") or {}
    temperature = float(options.get("temperature", 0.0) or 0.0)
    card = {
        "harness": harness,
        "harness_sha": (shas[0] if len(shas) == 1 else f"{len(shas)} distinct (one per task choice)") if shas else None,
        **about,
        "backbone": config.get("backbone"),
        "decoding": {"temperature": temperature, "greedy": temperature == 0.0,
                     **{k: v for k, v in options.items() if k != "temperature"}},
        "budgets": {"max_steps": config.get("max_steps") or "each task's own", "max_tokens": config.get("max_tokens"),
                    "max_wall_s": config.get("max_wall_s")},
        "suite": config.get("suite"), "split": config.get("split"), "suite_version": meta.get("suite_version"),
        "n_tasks": int(done["task_id"].nunique()), "task_list_hash": task_list_hash(done["task_id"]),
        "seeds": sorted({int(s) for s in done["seed"].dropna()}),
        "jitlab_commit": meta.get("jitlab_commit"),
        "replay_cache_hit_share": (float((n_calls * calls["cached"].fillna(0).astype(int)).sum()) / total
                                   if total else None),
        "card_from": "computed from the run's records when read",
    }
    if str(card["suite"] or "").startswith(MIX_PREFIX):   # a mix: its tasks by source suite (family <suite>/<family>)
        tasks = done.drop_duplicates("task_id")["family"]
        card["tasks_by_suite"] = tasks.map(lambda f: source_of(f)[0]).value_counts(sort=False).to_dict()
    card["unknown"] = [k for k in ("suite_version", "jitlab_commit", "modules") if card.get(k) is None]
    return card


def read_card(run_dir: str | Path) -> dict:
    """The card of a run directory or export: its ``card.json`` if it has one, else computed from its records. A
    damaged ``card.json`` (not JSON, not a mapping, missing or mistyped fields: one :func:`format_card` cannot
    print) is named in a warning and the card computed from the records instead."""
    path = Path(run_dir) / CARD_NAME
    if path.is_file():
        try:
            card = {**json.loads(path.read_text()), "card_from": f"{CARD_NAME} written by jitlab export"}
            format_card(card)   # the fields it prints are there, with their types
            return card
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            warnings.warn(f"{path} is damaged ({type(exc).__name__}: {exc}); its card is computed from the records "
                          "instead (export the run again to rewrite it)", stacklevel=2)
    return compute_card(load(run_dir))


def format_card(card: dict, title: str | None = None) -> str:
    """The card as a few indented lines (what ``jitlab figures`` and ``jitlab compare`` print)."""
    def show(value):
        return "not recorded" if value is None else value
    sha = card["harness_sha"] or "none: no finished episode"
    modules = card.get("modules")
    mods = "; ".join(f"{k}: {v}" for k, v in modules.items()) if isinstance(modules, dict) else show(modules)
    b = card["budgets"]
    d = card["decoding"]
    decoding = "greedy" if d.get("greedy") else f"temperature {d.get('temperature')}"
    extra = ", ".join(f"{k}={v}" for k, v in d.items() if k not in ("greedy", "temperature"))
    hits = card.get("replay_cache_hit_share")
    lines = [f"{title or card['harness']}: harness {card['harness']} "
             f"(sha {sha[:12] if len(sha) == 64 else sha}), backbone {card['backbone']} ({decoding}"
             f"{', ' + extra if extra else ''})",
             f"  modules: {mods}" + (f"; hooks: {', '.join(card['hooks']) or 'none'}" if card.get("hooks") is not None
                                     else ""),
             f"  budgets: max_steps {b['max_steps']}, max_tokens {b['max_tokens']}, max_wall_s {b['max_wall_s']}; "
             f"suite {card['suite']}/{card['split']} version {show(card.get('suite_version'))}, {card['n_tasks']} "
             f"tasks (hash {card['task_list_hash']}), seeds {card['seeds']}",
             *([f"  tasks by source suite: {', '.join(f'{k} {v}' for k, v in card['tasks_by_suite'].items())}"]
               if card.get("tasks_by_suite") else []),
             f"  jitlab commit {show(card.get('jitlab_commit'))}; replay-cache hits "
             f"{'-' if hits is None else f'{hits:.0%}'} of calls; card {card.get('card_from', '')}"]
    return "\n".join(lines)
