"""Stage II data: repair transitions (broken harness + typed diagnostic -> fix) from fault injection into valid
harnesses, whose fix is the known-good original (:mod:`jitlab.train.faults`).

    from jitlab.train.repair_data import build_stage2
    manifest = build_stage2(Stage2DataConfig(suite="textworld", stage1_data="runs/train/data1"), "runs/train/data2")
    jitlab train data stage2 --out runs/train/data2 [--set stage1_data=runs/train/data1]

Inputs: the seed harnesses (baselines excluded) and, optionally, the plans of a Stage I data folder: one per task
whose plan earned some reward, its repair prompts showing that task (the seeds' show the suite's first dev task), so
repair examples teach each task's own plan as Stage I does. Each input is validated first (``repair.validate_files``
with a smoke episode, on the first dev task); only valid inputs are broken.

Code format: each operator that applies breaks one file; the broken files are validated and kept only if
validation fails. The diagnostic is the one validation really reported (``kind_expected`` records the operator's
intended kind, ``kind_matches`` whether they agree). The prompt is exactly what ``code:<backbone>``'s ``repair``
sends (captured by handing the generator a recorder in place of a backbone, which answers with the fix); the
completion is the restored file(s) as ``<file>`` blocks, in thin form as the thin repair view shows files (the
library code imported, not written out: a candidate resolves them back to the originals), the files left out
staying as they were, as in ``CodeGenerator.repair``.

Plan format: each plan operator makes a plan that ``check_plan`` refuses; the diagnostic is that ``parse_error``;
prompt = ``plan:<backbone>``'s repair messages, completion = the original plan.

Split: faults of ``heldout_seeds`` inputs or ``heldout_ops`` operators are ``heldout`` (for before/after repair
evaluation), the rest ``train``.

Smoke episodes run with ``scripted:pick-first``, a test double, not a model: the injected faults do not depend on
the backbone's replies (recorded in the manifest). Validation results are cached by harness sha in
``validation.json``, so a rerun does not validate again.

Files: ``repairs.jsonl`` (all examples; ``format``, ``split``, ``op``, ``input``, ``diagnostic``, ``prompt``,
``completion``, ``touched``), ``manifest.json`` (config, counts per format x op x kind, drops, hashes, versions).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import ConfigError
from jitlab.harness import harness_sha, read_files, seed_bank_dir, seed_names
from jitlab.jit.generate import Candidate, format_blocks, get_generator
from jitlab.jit.generate.base import describe_files
from jitlab.jit.generate.code import thin_files
from jitlab.jit.generate.plan import PlanError, check_plan, plan_files, plan_of, plan_text
from jitlab.jit.repair import RepairConfig, validate_files
from jitlab.llm.scripted import get_scripted
from jitlab.protocol import Completion
from jitlab.runtime import Budget, LLMHandle
from jitlab.train.common import sole_folder
from jitlab.train.config import Stage2DataConfig
from jitlab.train.faults import CODE_FAULTS, PLAN_FAULTS, inject, inject_plan
from jitlab.train.records import (
    file_sha256,
    read_jsonl,
    versions,
    write_json,
    write_jsonl,
)

__all__ = ["SMOKE_BACKBONE", "build_stage2", "repair_prompt"]

SMOKE_BACKBONE = "scripted:pick-first"


class _Recorder:
    """Stands where a backbone goes: keeps the messages it is sent and answers ``reply``. Used only to capture the
    exact prompt a generator's ``repair`` builds; not a model and never part of a run."""
    id = "recorder"

    def __init__(self, reply: str):
        self.reply, self.messages = reply, None

    def chat(self, messages, **params) -> Completion:
        self.messages = messages
        return Completion(self.reply)


def repair_prompt(generator: str, files: dict, diagnostic: dict, task: dict, reply: str = "", meta: dict | None = None,
                  **config):
    """The messages ``generator`` (``code:x`` or ``plan:x``, with its ``config`` fields) sends to repair ``files`` with
    ``diagnostic``."""
    recorder = _Recorder(reply)
    get_generator(generator, **config).repair(Candidate(dict(files), generator, meta=dict(meta or {})), diagnostic, task,
                                              recorder)
    return recorder.messages


def _inputs(cfg: Stage2DataConfig) -> list[tuple[str, dict, tuple[str, str] | None]]:
    """(name, files, (split, task id) of a Stage I example or None) of each input."""
    out = []
    if cfg.seeds:
        for name in seed_names():
            files = read_files(seed_bank_dir() / name)
            if not describe_files(files).get("baseline"):
                out.append((name, files, None))
    if cfg.stage1_data:
        path = Path(cfg.stage1_data) / "sft.jsonl"
        if not path.is_file():
            raise ConfigError(f"--stage1-data {cfg.stage1_data}: no sft.jsonl; build it with "
                              "`jitlab train data stage1`")
        seen = set()
        for row in read_jsonl(path):   # one per task: its plan, shown with that task's prompt
            if (row.get("reward") or 0) > 0 and row["task_id"] not in seen:
                seen.add(row["task_id"])
                out.append((f"stage1:{row['task_id']}", plan_files(json.loads(row["plan"]), "teacher"),
                            (row.get("split") or "train", row["task_id"])))
    if cfg.only:
        missing = sorted(set(cfg.only) - {name for name, *_ in out})
        if missing:
            raise ConfigError(f"--only: no input named {', '.join(missing)}; inputs: {', '.join(n for n, *_ in out)}")
        out = [i for i in out if i[0] in cfg.only]
    if not out:
        raise ConfigError("no input harness: keep seeds: true or pass --set stage1_data=<Stage I data folder>")
    return out


def _task(suite, split: str, task_id: str):
    """The task ``task_id`` of ``suite``'s ``split`` (a Stage I example's task); ConfigError when it is not there."""
    for spec in suite.tasks(split):
        if spec.id == task_id:
            return spec
    raise ConfigError(f"--stage1-data: task {task_id} is not in {suite.name}'s {split} split; build Stage I data on "
                      f"the same suite (--suite {suite.name})")


@sole_folder("Stage II data")
def build_stage2(cfg: Stage2DataConfig, out: str | Path) -> dict:
    """Write Stage II repair examples to ``out`` (see the module docstring); returns the manifest."""
    unknown = sorted(set(cfg.ops) - set(CODE_FAULTS) - set(PLAN_FAULTS))
    if unknown:
        raise ConfigError(f"--ops: unknown operator(s) {', '.join(unknown)}; known: "
                          f"{', '.join([*CODE_FAULTS, *PLAN_FAULTS])}")
    suite = get_suite(cfg.suite)
    task = suite.tasks("dev")[0]
    inputs = _inputs(cfg)
    about = {name: _task(suite, *source) if source else task for name, _, source in inputs}   # before writing
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = RepairConfig(max_rounds=0, smoke_steps=cfg.smoke_steps, allow_unisolated=cfg.allow_unisolated)
    cache_path = out / "validation.json"
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}

    def validate(files: dict) -> dict:
        sha = harness_sha(files)
        if sha not in cache:
            backbone = get_scripted(SMOKE_BACKBONE.split(":", 1)[1])
            llm = LLMHandle(backbone, Budget(max_tokens=10 ** 6), None, seed=0, phase="select")
            v = validate_files(files, task, suite, llm, config, out / "validate")
            cache[sha] = {"ok": v.ok, "stage": v.stage, "diagnostic": v.diagnostic}
            write_json(cache_path, cache)
        return cache[sha]

    rows, drops = [], {"invalid_input": [], "fault_passed_validation": 0}
    code_ops = [op for op in (cfg.ops or CODE_FAULTS) if op in CODE_FAULTS]
    plan_ops = [op for op in (cfg.ops or PLAN_FAULTS) if op in PLAN_FAULTS]
    for name, files, _ in inputs:
        if not validate(files)["ok"]:
            drops["invalid_input"].append(name)
            continue
        held = name in cfg.heldout_seeds
        public = about[name].public()       # a Stage I plan: its own task's prompt
        base = {"input": name, "input_sha": harness_sha(files), "suite": cfg.suite, "task_id": about[name].id}
        if "code" in cfg.formats:
            for fault in inject(files, code_ops):
                check = validate(fault.broken)
                if check["ok"]:
                    drops["fault_passed_validation"] += 1
                    continue
                diag = check["diagnostic"]
                completion = format_blocks(thin_files(fault.fixed))     # thin, as the repair prompt shows files
                prompt = repair_prompt("code:student", fault.broken, diag, public, completion)
                rows.append({**base, "format": "code", "op": fault.op, "kind": diag.get("kind"),
                             "kind_expected": fault.kind, "kind_matches": diag.get("kind") == fault.kind,
                             "stage": check["stage"], "diagnostic": diag, "touched": fault.touched,
                             "broken_sha": harness_sha(fault.broken), "repair_note": fault.note,
                             "split": "heldout" if held or fault.op in cfg.heldout_ops else "train",
                             "prompt": prompt, "completion": [{"role": "assistant", "content": completion}]})
        plan = plan_of(files)
        if "plan" in cfg.formats and plan is not None:
            for fault in inject_plan(plan, plan_ops):
                broken = fault.broken["plan"]
                try:
                    check_plan(broken)
                except PlanError as exc:
                    diag = {"kind": "parse_error", "file": None, "line": None, "phase": "generate",
                            "message": str(exc)}
                shown = plan_text(broken)
                prompt = repair_prompt("plan:student", files, diag, public, plan_text(plan),
                                       {"reply": shown, "parsed_files": []})
                rows.append({**base, "format": "plan", "op": fault.op, "kind": "parse_error",
                             "kind_expected": fault.kind, "kind_matches": True, "stage": "parse", "diagnostic": diag,
                             "touched": ["plan"], "broken_plan": shown, "repair_note": fault.note,
                             "split": "heldout" if held or fault.op in cfg.heldout_ops else "train",
                             "prompt": prompt, "completion": [{"role": "assistant", "content": plan_text(plan)}]})
    counts: dict = {"examples": write_jsonl(out / "repairs.jsonl", rows), "by": {}}
    for r in rows:
        key = f"{r['format']}/{r['op']}/{r['kind']}/{r['split']}"
        counts["by"][key] = counts["by"].get(key, 0) + 1
    counts["kind_mismatches"] = sum(not r["kind_matches"] for r in rows)
    manifest = {"kind": "stage2-data", "config": asdict(cfg), "counts": counts, "dropped": drops,
                "smoke_backbone": f"{SMOKE_BACKBONE} (test double; the faults do not depend on its replies)",
                "task": task.id, "hashes": {"repairs.jsonl": file_sha256(out / "repairs.jsonl")},
                "versions": versions()}
    write_json(out / "manifest.json", manifest)
    return manifest
