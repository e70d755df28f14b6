"""What the training stages share (:mod:`jitlab.train.stage1`, :mod:`jitlab.train.stage2`, :mod:`jitlab.train.evo`):
TrainingArguments from a config, the LoRA config, tracker checks, dropping over-long rows, one resumable trained
phase, the run folder's manifest (refused on drift) and the ``adapter`` link.

    manifest = open_run(out, "stage2", fingerprint(cfg, hashes), {...})      # ConfigDrift if out holds another run
    record = train_phase("sft", out, make_trainer, rows, base, below)        # resumes from the newest checkpoint
    link_adapter(out, out / "sft" / "adapter")

Each phase folder holds ``checkpoint-N`` (Trainer), ``runs/`` (TensorBoard, via ``report_to``), ``log_history.jsonl``
and ``adapter/`` with a ``DONE`` record; a phase whose adapter is DONE is skipped on rerun.
"""
from __future__ import annotations

import functools
import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

from jitlab.errors import ConfigDrift, ConfigError
from jitlab.jit.generate import get_generator
from jitlab.llm.adapters import ignore_peft_checkpointing_probe, write_base
from jitlab.run_options import NOT_FINGERPRINTED
from jitlab.runtime import EPISODE_MAX_WALL_S
from jitlab.store import sole_writer
from jitlab.train.records import versions, write_json, write_jsonl

__all__ = ["DONE", "check_reporters", "fingerprint", "fitting", "link_adapter", "lora_config", "open_run",
           "policy_generator", "sole_folder", "train_phase", "training_arguments", "warmup_steps"]

DONE = "DONE"
# what may change between a run and its resume (logging and checkpoint cadence, evaluation size, speed)
_RESUMABLE = {"save_steps", "save_total_limit", "logging_steps", "report_to", "threads", "eval", "eval_limit",
              "micro_batch",   # micro_batch: how a group's loss is split, not what is trained
              *NOT_FINGERPRINTED}   # concurrency, retries, the spend caps (a run stopped at its cap resumes with more)
# options added after training runs were made: at their default they are left out, so those runs still resume
_ADDED = {"max_wall_s": EPISODE_MAX_WALL_S}


def lora_config(cfg):
    from peft import LoraConfig
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.target_modules, task_type="CAUSAL_LM")


def policy_generator(fmt: str, backbone: str = "policy", code_references: int = 1, **config):
    """The ``<fmt>:<backbone>`` generator (``plan`` or ``code``) whose prompt a policy of that format is trained and
    evaluated on (its ``messages(task, references)``), as JIT inference sends it."""
    extra = {"code_references": code_references} if fmt == "code" else {}
    return get_generator(f"{fmt}:{backbone}", None, **extra, **config)


def warmup_steps(ratio: float, steps: int) -> int:
    """Warm-up steps of a run of ``steps`` optimizer steps: ``floor(ratio * steps)``, and never all of them.
    The linear warm-up gives step 0 a learning rate of 0, so transformers' ``ceil(ratio * steps)`` made a 1-step
    (smoke) run train nothing: with this rule a 1-step run has no warm-up and every run has a step with lr > 0."""
    return max(0, min(math.floor(ratio * steps), steps - 1))


def _optimizer_steps(cfg, steps: int | None, epochs: float, examples: int | None) -> int | None:
    """The run's optimizer steps: ``steps``, else a lower bound from the examples and epochs (None if unknown)."""
    if steps:
        return steps
    if examples is None:
        return None
    return max(1, math.floor(epochs * max(1, -(-examples // cfg.batch_size) // cfg.grad_accum)))


def training_arguments(cfg, output_dir: Path, steps: int | None, epochs: float, learning_rate: float,
                       examples: int | None = None) -> dict:
    """The TrainingArguments fields every phase shares; CPU-safe precision and checkpointing from the config.
    ``examples`` (the rows trained on) sizes the warm-up of an epoch-based run (:func:`warmup_steps`)."""
    total = _optimizer_steps(cfg, steps, epochs, examples)
    return {
        "output_dir": str(output_dir), "max_length": cfg.max_length, "num_train_epochs": epochs,
        "max_steps": steps or -1, "learning_rate": learning_rate,
        "per_device_train_batch_size": cfg.batch_size, "gradient_accumulation_steps": cfg.grad_accum,
        "warmup_steps": warmup_steps(cfg.warmup_ratio, total) if total else cfg.warmup_ratio,
        "lr_scheduler_type": cfg.lr_scheduler, "logging_steps": cfg.logging_steps,
        "save_strategy": "steps", "save_steps": cfg.save_steps, "save_total_limit": cfg.save_total_limit,
        "report_to": [r for r in cfg.reporters() if r != "none"] or "none", "bf16": cfg.bf16,
        "activation_checkpointing": cfg.gradient_checkpointing, "use_cpu": cfg.use_cpu, "seed": cfg.seed,
        "data_seed": cfg.seed,
        "dataloader_num_workers": 0, "disable_tqdm": True}


def check_reporters(cfg) -> None:
    import importlib.util
    for name in cfg.reporters():
        if name != "none" and importlib.util.find_spec(name) is None:
            raise ConfigError(f"--report-to {name}: the {name} package is not installed; pip install {name}, or use "
                              "report_to: tensorboard (installed with jitlab) or none")


def fingerprint(cfg, hashes: dict) -> dict:
    """What must not change for a resume to be the same run."""
    config = {k: v for k, v in asdict(cfg).items() if k not in _RESUMABLE and (k not in _ADDED or v != _ADDED[k])}
    return {"config": config, "data": hashes}


def sole_folder(what: str):
    """Decorate ``fn(first, out, ...)`` (a training step, data builder or evaluation, its folder second) to hold
    ``out``'s writer lock while it runs: a second process writing the same folder gets RunLocked naming the first
    (jitlab.store.sole_writer)."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(first, out, *args, **kwargs):
            with sole_writer(out, f"{what} folder {out}"):
                return fn(first, out, *args, **kwargs)
        return run
    return wrap


def open_run(out: Path, kind: str, fp: dict, extra: dict) -> dict:
    """Create ``out`` and its manifest.json; ConfigDrift when ``out`` holds a run with another fingerprint."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "manifest.json"
    if path.is_file():
        before = json.loads(path.read_text())
        if before.get("fingerprint") != fp:
            raise ConfigDrift(f"{out} holds a {before.get('kind', kind)} run with another config or other data; choose "
                              "a new --out (or delete the folder) to start over")
    manifest = {"kind": kind, "fingerprint": fp, "versions": versions(), "phases": {}, **extra}
    write_json(path, manifest)
    return manifest


def fitting(tokenizer, rows: list[dict], max_length: int, phase: str, margin: int = 8) -> list[dict]:
    """The rows whose prompt leaves at least ``margin`` tokens of completion within ``max_length`` (TRL truncates
    from the end, so a longer prompt would train on nothing); ConfigError when none does."""
    def prompt_tokens(row):
        text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])
    lengths = [prompt_tokens(r) for r in rows]
    kept = [r for r, n in zip(rows, lengths) if n + margin <= max_length]
    if not kept:
        raise ConfigError(f"max_length {max_length} leaves no room for the completion in any {phase} example: the "
                          f"prompts are {min(lengths)}-{max(lengths)} tokens; raise max_length (or build the data with "
                          "shorter prompts)")
    if len(kept) < len(rows):
        import logging
        logging.getLogger(__name__).warning("%s: %d of %d examples dropped: prompt longer than max_length %d - %d",
                                            phase, len(rows) - len(kept), len(rows), max_length, margin)
    return kept


def train_phase(name: str, out: Path, make_trainer, rows: list[dict], base: str, below: list[Path]) -> dict:
    """Train one phase (resuming from its newest checkpoint), save its adapter; returns its record.
    ``make_trainer(folder)`` returns (trainer, examples dropped as too long)."""
    from transformers.trainer_utils import get_last_checkpoint

    folder = out / name
    adapter = folder / "adapter"
    if (adapter / DONE).is_file():
        return json.loads((adapter / DONE).read_text())
    folder.mkdir(parents=True, exist_ok=True)
    ignore_peft_checkpointing_probe()   # peft and TRL read a deprecated transformers property (see there)
    resume = get_last_checkpoint(str(folder))
    start = time.perf_counter()
    trainer, dropped = make_trainer(folder)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(adapter))
    write_base(adapter, base, [os.path.relpath(b, adapter) for b in below])
    write_jsonl(folder / "log_history.jsonl", trainer.state.log_history)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    record = {"phase": name, "examples": len(rows), "dropped_too_long": dropped,
              "global_step": trainer.state.global_step,
              "resumed_from": Path(resume).name if resume else None, "wall_s": round(time.perf_counter() - start, 2),
              "train_loss": result.training_loss, "first_loss": losses[0] if losses else None,
              "last_loss": losses[-1] if losses else None}
    (adapter / DONE).write_text(json.dumps(record) + "\n")
    return record


def link_adapter(out: Path, last: Path) -> str:
    """Point ``out/adapter`` at the last phase's adapter; returns the relative target."""
    link = out / "adapter"
    if link.is_symlink() or link.exists():
        link.unlink()
    target = last.relative_to(out)
    link.symlink_to(target, target_is_directory=True)
    return str(target)
