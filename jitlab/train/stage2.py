"""Stage II training: SFT on repair transitions (broken harness or plan + typed diagnostic -> the fix), LoRA via peft,
on top of a Stage I adapter when given; then repair success within ``eval_rounds`` rounds on the held-out faults.

    from jitlab.train.stage2 import run_stage2, evaluate_repair
    run_stage2(load_config(Stage2Config, data="runs/train/data2", stage1="runs/train/s1/adapter"), "runs/train/s2")
    jitlab train stage2 --set data=runs/train/data2 --set stage1=runs/train/s1/adapter --out runs/train/s2
    evaluate_repair("embedded", "runs/train/data2", "runs/train/eval-untrained")     # the "before" number

Data: ``repairs.jsonl`` of ``jitlab train data stage2`` (:mod:`jitlab.train.repair_data`), rows of split ``train``
whose ``format`` is in ``formats``; each row's prompt is exactly the generator's repair prompt, so the loss is on the
fix only (TRL's ``completion_only_loss`` default for prompt-completion rows). With ``rehearsal`` (a Stage I data
folder; the pipeline passes its own) each task's best Stage I SFT example is trained on among them. On repairs of
the seeds' plans, all shown on one coin game, TextWorld's Stage II turned the Stage I policy's plan into ReAct's on
12 of its 18 test tasks, and rehearsal alone did not stop it; with repairs of Stage I's own plans, each shown with
its task (``data2: {seeds: false}``), the policy kept a Stage I plan on all 18 (docs/measurements.md, the third
run).

Phases and files under ``out`` (the conventions of :mod:`jitlab.train.common`, as Stage I):

    sft/      SFTTrainer, a fresh LoRA on the base (or on the base with the Stage I chain merged in) -> sft/adapter,
              whose jitlab_base.json lists the Stage I adapters below it, so ``hf:<out>/adapter`` loads the whole policy
    adapter   -> sft/adapter
    eval/     heldout.jsonl (one record per held-out fault: format, op, kind, ok, rounds, outcome per round),
              repairs.jsonl (the repair loop's own transitions), summary.json (rates per format and per kind)

Evaluation: each held-out fault is rebuilt as the candidate the JIT repair loop would hold (code: the broken files,
rebuilt by re-injecting the row's operator into its input and matched by sha; plan: the broken reply, no files) with
its recorded diagnostic as the first validation, then ``jitlab.jit.repair.validate_and_repair`` runs with
``<format>:hf:<out>/adapter`` as the generator. Smoke episodes of the validation run on ``eval_executor``
(``scripted:pick-first``, a test double, by default: the injected faults do not depend on the executor's replies);
the generator always uses the trained policy. A repair "succeeds" when validation passes within the rounds.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import ConfigError
from jitlab.harness import harness_sha
from jitlab.jit.generate import Candidate, get_generator
from jitlab.jit.repair import RepairConfig, RepairLog, Validation, validate_and_repair
from jitlab.llm import get_backbone
from jitlab.llm.adapters import adapter_chain, is_adapter_dir, load_adapter
from jitlab.llm.hf import load_base
from jitlab.plumbing import json_digest
from jitlab.runtime import Budget, LLMHandle
from jitlab.train import common
from jitlab.train.common import fingerprint, fitting, link_adapter, lora_config, open_run, sole_folder, train_phase
from jitlab.train.config import Stage2Config, Stage2DataConfig
from jitlab.train.data import task_index
from jitlab.train.faults import inject
from jitlab.train.records import file_sha256, read_jsonl, write_json, write_jsonl
from jitlab.train.repair_data import _inputs

__all__ = ["evaluate_repair", "load_repairs", "run_stage2", "training_arguments"]


def training_arguments(cfg: Stage2Config, output_dir: Path, examples: int | None = None) -> dict:
    return common.training_arguments(cfg, output_dir, cfg.steps, cfg.epochs, cfg.learning_rate, examples)


def load_repairs(data: str | Path, split: str, formats) -> tuple[list[dict], dict]:
    """(rows of ``split`` in ``formats``, the data's manifest); one-line ConfigErrors for a missing or empty folder."""
    data = Path(data)
    path = data / "repairs.jsonl"
    if not path.is_file():
        raise ConfigError(f"data {data}: no repairs.jsonl; build it with `jitlab train data stage2 --out {data}`")
    manifest_path = data / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    rows = [r for r in read_jsonl(path) if r.get("split") == split and r.get("format") in formats]
    if not rows:
        raise ConfigError(f"{path} holds no {split} example of format(s) {', '.join(formats)}; rebuild the data with "
                          "those formats or set --formats")
    return rows, manifest


@sole_folder("Stage II")
def run_stage2(cfg: Stage2Config, out: str | Path) -> dict:
    """Train (or resume) Stage II into ``out``, then evaluate it when ``cfg.eval``; returns the manifest."""
    if cfg.threads:
        import torch
        torch.set_num_threads(cfg.threads)
    common.check_reporters(cfg)
    rehearsed = _rehearsal(cfg.rehearsal)
    rows, _ = load_repairs(cfg.data, "train", cfg.formats)
    out = Path(out)
    base, below = cfg.base, []
    if cfg.stage1:
        if not is_adapter_dir(cfg.stage1):
            raise ConfigError(f"--stage1 {cfg.stage1}: not an adapter folder (no adapter_config.json); pass a Stage I "
                              "run's adapter, e.g. runs/train/s1/adapter")
        base, below = adapter_chain(cfg.stage1)
    hashes = {"repairs.jsonl": file_sha256(Path(cfg.data) / "repairs.jsonl"),
              "stage1": [file_sha256(Path(b) / "adapter_model.safetensors") for b in below]}
    if cfg.rehearsal:   # the rows rehearsed, not the file: a change in which rows are kept reruns the stage
        hashes["rehearsal"] = json_digest(rehearsed)
    manifest = open_run(out, "stage2", fingerprint(cfg, hashes), {
        "config": asdict(cfg), "data": hashes, "base": base, "below": [str(b) for b in below],
        "counts": {"train": len(rows), "by_format": {f: sum(r["format"] == f for r in rows) for f in cfg.formats},
                   "rehearsal": len(rehearsed)}})

    def sft_trainer(folder: Path):
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        if cfg.stage1:
            tokenizer, model = load_adapter(cfg.stage1, load_base)
        else:
            tokenizer, model = load_base(base)
        kept = fitting(tokenizer, rows + rehearsed, cfg.max_length, "stage2 sft")
        dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in kept])
        args = SFTConfig(**training_arguments(cfg, folder, len(kept)), packing=False)
        return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=lora_config(cfg)), len(rows) + len(rehearsed) - len(kept)
    manifest["phases"]["sft"] = train_phase("sft", out, sft_trainer, rows + rehearsed, base, below)
    manifest["adapter"] = link_adapter(out, out / "sft" / "adapter")
    write_json(out / "manifest.json", manifest)
    summary_path = out / "eval" / "summary.json"
    done = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    settings = {"rounds": cfg.eval_rounds, "limit": cfg.eval_limit, "executor": cfg.eval_executor}
    if cfg.eval and all(done.get(k) == v for k, v in settings.items()):
        manifest["eval"] = done        # a rerun of a finished run does not evaluate again
    elif cfg.eval:
        manifest["eval"] = evaluate_repair(f"hf:{out / 'adapter'}", cfg.data, out / "eval", cfg.formats,
                                           rounds=cfg.eval_rounds, limit=cfg.eval_limit, executor=cfg.eval_executor,
                                           allow_unisolated=cfg.allow_unisolated)
        write_json(out / "manifest.json", manifest)
    return manifest


def _rehearsal(folder: str | None) -> list[dict]:
    """Each task's first SFT example (prompt, completion) of a Stage I data folder, trained on among the repairs (the
    trainer shuffles them together; [] without one); ConfigError when the folder holds no sft.jsonl. Stage I data lists
    a task's plans best first, so with ``examples_per_task`` > 1 only the best is rehearsed: rehearsing every one
    trained DBBench's policy back onto the ReAct plan that Stage I's DPO had ranked below the sql plan (its greedy
    plan on the test tasks: sql on 16 of 20 after Stage I, ReAct on 14 of 20 after Stage II; session 30)."""
    if not folder:
        return []
    path = Path(folder) / "sft.jsonl"
    if not path.is_file():
        raise ConfigError(f"--rehearsal {folder}: no sft.jsonl there; pass a Stage I data folder (jitlab train data "
                          "stage1 --out DIR)")
    first = {}
    for r in read_jsonl(path):
        first.setdefault(r.get("task_id") or json.dumps(r["prompt"], sort_keys=True), r)
    return [{"prompt": r["prompt"], "completion": r["completion"]} for r in first.values()]


class _Pinned:
    """A generator that repairs with its own handle (the policy), whatever handle the repair loop passes: the loop's
    handles go to the validation smoke episodes (the executor)."""

    def __init__(self, generator, handle):
        self.generator, self.handle, self.name = generator, handle, generator.name

    def repair(self, candidate, diagnostic, task, llm=None, round: int = 1):
        return self.generator.repair(candidate, diagnostic, task, self.handle, round=round)


def _broken_candidate(row: dict, inputs: dict, name: str):
    """The candidate the repair loop would hold for ``row``, and its first (failed) validation."""
    if row["format"] == "plan":
        # no files: a plan that does not parse renders none, so a fix that restores the original plan has a new sha
        cand = Candidate({}, name, meta={"reply": row["broken_plan"], "parsed_files": []})
    else:
        files = inputs.get(row["input"])
        broken = next((f.broken for f in inject(files, [row["op"]]) if harness_sha(f.broken) == row["broken_sha"]),
                      None) if files else None
        if broken is None:
            return None, None
        cand = Candidate(broken, name)
    return cand, Validation(False, row.get("stage") or "load", cand.sha, row["diagnostic"])


def evaluate_repair(backbone, data: str | Path, out: str | Path, formats=("plan",), rounds: int = 2,
                    limit: int | None = None, executor: str = "scripted:pick-first",
                    allow_unisolated: bool = False, split: str = "heldout") -> dict:
    """Repair success within ``rounds`` rounds of ``<format>:<backbone>`` on the ``split`` faults of a Stage II data
    folder; writes ``out``/heldout.jsonl, repairs.jsonl, summary.json and returns the summary. ``backbone``: a spec
    (``hf:<adapter>``, ``embedded``) or a backbone object (its ``id`` names the generator)."""
    rows, manifest = load_repairs(data, split, formats)
    rows = rows[:limit] if limit else rows
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data_cfg = manifest.get("config") or {}
    inputs = {name: files for name, files, _ in _inputs(Stage2DataConfig(**data_cfg))} \
        if any(r["format"] == "code" for r in rows) else {}
    model = get_backbone(backbone) if isinstance(backbone, str) else backbone
    backbone = backbone if isinstance(backbone, str) else model.id
    policy = LLMHandle(model, Budget(max_tokens=10 ** 7), None, seed=0, phase="repair")
    smoke = get_backbone(executor)
    generators = {f: _Pinned(get_generator(f"{f}:{backbone}", policy), policy) for f in formats}
    config = RepairConfig(max_rounds=rounds, smoke_steps=int(data_cfg.get("smoke_steps", 2)),
                          allow_unisolated=allow_unisolated)
    (out / "repairs.jsonl").unlink(missing_ok=True)   # a rerun evaluates afresh
    log = RepairLog(out / "repairs.jsonl")
    records = []
    # the task each prompt shows: the suite's first dev task, or a Stage I input's own (train) task
    tasks = task_index({row["suite"] for row in rows})
    for row in rows:
        suite = get_suite(row["suite"])
        task = tasks[row["task_id"]][1]
        cand, first = _broken_candidate(row, inputs, f"{row['format']}:{backbone}")
        record = {k: row.get(k) for k in ("format", "op", "kind", "input", "split", "suite", "task_id")}
        if cand is None:
            records.append({**record, "ok": False, "rounds": 0, "outcomes": [], "error": "fault not reproducible"})
            continue
        outcome = validate_and_repair(
            cand, generators[row["format"]], task.public(), task, suite,
            lambda phase: LLMHandle(smoke, Budget(max_tokens=10 ** 6), None, seed=0, phase=phase), config,
            out / "validate", log=log, first=first)
        records.append({**record, "ok": outcome.ok, "rounds": outcome.rounds,
                        "outcomes": [t["outcome"] for t in outcome.transitions],
                        "final_kind": (outcome.validation.diagnostic or {}).get("kind")})
    write_jsonl(out / "heldout.jsonl", records)
    summary = {"backbone": backbone, "rounds": rounds, "limit": limit, "executor": executor, "split": split,
               "n": len(records),
               "repaired": sum(r["ok"] for r in records), "by_format": {}, "by_kind": {}}
    summary["rate"] = summary["repaired"] / len(records) if records else None
    for key, field_ in (("by_format", "format"), ("by_kind", "kind")):
        for r in records:
            cell = summary[key].setdefault(str(r[field_]), {"n": 0, "repaired": 0})
            cell["n"] += 1
            cell["repaired"] += r["ok"]
    write_json(out / "summary.json", summary)
    return summary
