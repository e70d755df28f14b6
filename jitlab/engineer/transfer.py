"""Cross-backbone transfer: learn a harness overlay on one backbone's dev trajectories, apply it to others.

    jitlab transfer --suite textworld --learn-on embedded,gemma3-270m --apply-to embedded,gemma3-270m \\
        --limit 6 --out runs/transfer-tw
    from jitlab.engineer.transfer import TransferConfig, run_transfer
    result = run_transfer(TransferConfig(suite="toy", learn_on="scripted:pick-first", apply_to="scripted:pick-last"))

For each learner A (``--learn-on``, comma-separated: one matrix row each): the base harness runs on A's first
``dev`` dev tasks (``learn/<A>/dev-base``), then ``method`` turns those records into a ``hooks.py`` overlay:
``interventions`` (Life-Harness mining, jitlab.engineer.interventions) or ``rules`` (the offline rule teacher's
first patch for the dev packet, jitlab.engineer.rules). The overlay is written to ``learn/<A>/hooks.py`` and the
patched harness folder to ``learn/<A>/harness``. For each target B (a matrix column: ``--apply-to`` plus the
learners, so the diagonal is the in-backbone Δ): the base harness runs once on B's first ``limit`` test tasks
(``apply/<B>/base``) and each learner's patched harness on the same tasks and seed (``apply/<B>/from-<A>``).
A cell is Δ = success(patched) − success(base) over the (task id, seed) pairs both runs finished (jitlab.engineer
.loop.delta), with tokens and cost per task of both runs. Base and patched runs are both sandboxed.

Written under ``out``: every run directory (the jitlab run format), ``transfer.json`` (config, the backbones and
which weights each one is, the learned overlays' evidence, the cells), ``matrix.csv`` and ``matrix.md`` (one row
per cell) and ``matrix.png``/``.pdf`` (jitlab.viz.transfer). A rerun with the same ``out`` resumes: finished
episodes are not rerun (the run store's resume), so an interrupted matrix continues where it stopped.
Caveat: with ``method=rules`` an empty packet (no failures on dev) gives a no-op overlay, whose Δ is 0.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.engineer.loop import EngineerConfig, _tasks, delta, run_batch
from jitlab.errors import ConfigError
from jitlab.fields import check_fields
from jitlab.harness import resolve
from jitlab.llm.base import DEFAULT_BACKBONE, check_options, weights_of
from jitlab.llm.lazy import BackbonePool
from jitlab.run_options import EpisodeOptions, Quiet, RunControls, adjust, derive
from jitlab.stats import discordant, mcnemar_exact, wilson

__all__ = ["METHODS", "TransferConfig", "learn_overlay", "run_transfer", "slug"]

METHODS = ("interventions", "rules")


@dataclass
@adjust(defaults={"concurrency": 6})
class TransferConfig(EpisodeOptions, RunControls, Quiet):
    suite: str = field(default="toy", metadata={"help": "suite name (jitlab suites)"})
    learn_on: str = field(default=DEFAULT_BACKBONE, metadata={"help": "backbone(s) whose dev trajectories the overlay "
                                                                      "is learned from, comma-separated (matrix rows)",
                                                              "nonempty": True})
    apply_to: str = field(default="", metadata={"help": "backbones the overlays are applied to, comma-separated "
                                                        "(matrix columns; the learners are added as columns too)"})
    harness: str = field(default="react", metadata={"help": "base harness: seed name or folder (never edited)"})
    method: str = field(default="interventions", metadata={"help": "interventions (mined) or rules (rule teacher)"})
    limit: int = field(default=6, metadata={"help": "test tasks per cell", "min": 1})
    dev: int | None = field(default=None, metadata={"help": "dev tasks to learn from (default: --limit)", "min": 1})
    family: str | None = field(default=None, metadata={"help": "only tasks of this family"})
    threshold: float = field(default=0.1, metadata={"help": "interventions: share of steps a pattern needs",
                                                    "min": 0.0, "max": 1.0})
    out: str = field(default="runs/transfer", metadata={"help": "output directory", "nonempty": True})

    def __post_init__(self):
        check_fields(self)
        if self.method not in METHODS:
            raise ConfigError(f"transfer: method {self.method!r} unknown; use one of {', '.join(METHODS)}")


def _names(text: str) -> list[str]:
    out: list[str] = []
    for name in (n.strip() for n in text.split(",")):
        if name and name not in out:
            out.append(name)
    return out


def slug(name: str) -> str:
    """A backbone name as a folder name (``hf:/m/x#f.gguf`` -> ``hf-m-x-f.gguf``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "backbone"


def _engineer_cfg(cfg: TransferConfig, backbone: str, split: str):
    return derive(EngineerConfig, cfg, suite=cfg.suite, harness=cfg.harness, backbone=backbone, split=split,
                  family=cfg.family, out=cfg.out, quiet=True)


def learn_overlay(method: str, run_dir: str | Path, threshold: float = 0.1) -> tuple[str, dict]:
    """(hooks.py text, evidence) learned from one run directory's records by ``method``."""
    if method == "interventions":
        from jitlab.engineer.interventions import intervention_patch, mine
        found = mine([run_dir], threshold=threshold)
        return intervention_patch(found), {"fields": found.fields, **found.evidence}
    if method == "rules":
        from jitlab.engineer.packets import build_packet
        from jitlab.engineer.proposer import make_engineer
        packet = build_packet(run_dir)
        proposal = make_engineer("rules", None).propose(packet, 1, "")[0]
        return proposal.text, {"rule": proposal.name, "note": proposal.note, "failure_counts": packet.get("failure_counts")}
    raise ConfigError(f"transfer: method {method!r} unknown; use one of {', '.join(METHODS)}")


def _weights(name: str) -> str:
    return weights_of(name)


def run_transfer(cfg: TransferConfig) -> dict:
    """Run the transfer matrix (see the module docstring); returns what is written to ``out/transfer.json``."""
    from jitlab.engineer.patches import apply_patch, patch_identity
    check_fields(cfg)
    learners, targets = _names(cfg.learn_on), _names(cfg.apply_to)
    if not learners:
        raise ConfigError("transfer: --learn-on names no backbone; give one or more, comma-separated")
    columns = targets + [n for n in learners if n not in targets]
    for name in columns:
        check_options(name, {})  # a missing hf: folder too, before out is written
    if len({slug(n) for n in columns}) != len(columns):
        raise ConfigError(f"transfer: backbones {columns} collide as folder names; rename one")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    base_folder = resolve(cfg.harness)
    say = (lambda *a: None) if cfg.quiet else (lambda *a: print(*a, flush=True))
    probe = _engineer_cfg(cfg, learners[0], "dev")
    dev_tasks = _tasks(probe, "dev", 0, cfg.dev or cfg.limit)
    test_tasks = _tasks(probe, "test", 0, cfg.limit)

    learned, backbones = {}, BackbonePool()   # one loaded model per backbone for every run of the matrix
    spend = cfg.command_spend(out)            # the caps bound the whole matrix, every run of it
    for a in learners:
        ldir = out / "learn" / slug(a)
        dev = run_batch(_engineer_cfg(cfg, a, "dev"), base_folder, dev_tasks, ldir / "dev-base", backbones, spend)
        text, evidence = learn_overlay(cfg.method, dev["run_dir"], cfg.threshold)
        (ldir / "hooks.py").write_text(text)
        folder = apply_patch(base_folder, text, ldir / "harness")
        learned[a] = {"folder": str(folder), "patch": str(ldir / "hooks.py"), "sha": patch_identity(base_folder, text),
                      "dev_success": dev["success_rate"], "dev_run_dir": dev["run_dir"], "evidence": evidence}
        say(f"learned on {a}: dev success {dev['success_rate']:.2f} over {len(dev_tasks)} tasks -> {ldir / 'hooks.py'}")

    cells = []
    for b in columns:
        adir = out / "apply" / slug(b)
        bcfg = _engineer_cfg(cfg, b, "test")
        base = run_batch(bcfg, base_folder, test_tasks, adir / "base", backbones, spend)
        for a in learners:
            patched = run_batch(bcfg, learned[a]["folder"], test_tasks, adir / f"from-{slug(a)}", backbones, spend)
            d = delta(base, patched)
            cells.append({"learned_on": a, "applied_to": b, "delta": d["delta"], "base_success": d["base"],
                          "patched_success": d["patched"], "n": len(d["pairs"]), "pairs": d["pairs"],
                          **_paired(base, patched, d["pairs"]),
                          "unpaired": d["unpaired"], "seed": cfg.seed,
                          "base_tokens_per_task": base["tokens_per_task"],
                          "patched_tokens_per_task": patched["tokens_per_task"],
                          "base_cost_per_task": base["cost_per_task"], "patched_cost_per_task": patched["cost_per_task"],
                          "base_run_dir": base["run_dir"], "patched_run_dir": patched["run_dir"]})
            shown = "n/a" if d["delta"] is None else f"{d['base']:.2f} -> {d['patched']:.2f} (Δ {d['delta']:+.2f})"
            say(f"{a} -> {b}: {shown} on {len(d['pairs'])} test tasks")

    result = {"config": asdict(cfg), "base_harness": str(base_folder), "learners": learners, "targets": columns,
              "backbones": {n: _weights(n) for n in columns}, "dev_task_ids": [t.id for t in dev_tasks],
              "test_task_ids": [t.id for t in test_tasks], "learned": learned, "cells": cells}
    (out / "transfer.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str))
    _write_tables(cells, out)
    return result


def _paired(base: dict, patched: dict, pairs) -> dict:
    """Wins and losses of the overlay over the paired tasks, their exact McNemar p and both Wilson 95% intervals."""
    keys = [tuple(p) for p in pairs]
    sb = [bool(base["episodes"][k]) for k in keys]
    sp = [bool(patched["episodes"][k]) for k in keys]
    wins, losses = discordant(sb, sp)
    return {"wins": wins, "losses": losses, "mcnemar_p": mcnemar_exact(losses, wins),
            "base_success_wilson": list(wilson(sum(sb), len(keys))),
            "patched_success_wilson": list(wilson(sum(sp), len(keys)))}


def _write_tables(cells: list[dict], out: Path) -> None:
    import pandas as pd

    from jitlab.viz.transfer import save_transfer_matrix, transfer_table
    frame = pd.DataFrame([{k: v for k, v in c.items() if k not in ("pairs", "unpaired")} for c in cells])
    frame.to_csv(out / "matrix.csv", index=False)
    (out / "matrix.md").write_text(transfer_table(frame) + "\n")
    save_transfer_matrix(frame, out / "matrix")
