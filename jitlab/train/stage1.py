"""Stage I training: SFT on the teacher's plans, then DPO on Pareto pairs; LoRA adapters via peft, TRL's trainers.

    from jitlab.train.stage1 import run_stage1
    run_stage1(load_config(Stage1Config, data="runs/train/data1"), "runs/train/stage1")
    jitlab train stage1 --config jitlab/train/configs/gpu/stage1.yaml --set data=runs/train/data1 --out runs/train/stage1

Phases, each in its own folder under ``out``:

    sft/   SFTTrainer on sft.jsonl (conversational prompt-completion rows: the loss is on the plan only, TRL's
           ``completion_only_loss`` default), a fresh LoRA on the base. -> sft/adapter
    dpo/   DPOTrainer on pairs.jsonl (loss ``sigmoid`` + ``sft`` on the chosen plan, weights 1 and dpo_sft_weight),
           on the base with sft/adapter merged in and a fresh LoRA on top: with peft the reference model is the
           adapter switched off, i.e. the SFT policy, not the raw base. Skipped without pairs or with dpo=false.
    adapter -> the last phase's adapter (a symlink); load it as ``hf:<out>/adapter`` or ``plan:hf:<out>/adapter``.

Each adapter folder holds peft's files, the tokenizer and ``jitlab_base.json`` (the base backbone spec plus the
adapters below it), so it loads on its own (jitlab.llm.adapters). Checkpoints every ``save_steps`` optimizer steps
(``checkpoint-N``, the newest ``save_total_limit`` kept); rerunning the same command resumes a killed phase from its
newest checkpoint through the Trainer's ``resume_from_checkpoint`` (so at most one save interval is lost), and skips
finished phases. Curves go through TRL's ``report_to`` (TensorBoard event files under ``<phase>/runs/`` by default:
``tensorboard --logdir <out>``); ``<phase>/log_history.jsonl`` is the Trainer's own ``state.log_history``.
``manifest.json`` records the config, the data's hashes and counts, package versions, per-phase wall time and steps.
Rerunning with another config or other data into the same ``out`` is refused (ConfigDrift).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from jitlab.errors import ConfigDrift, ConfigError
from jitlab.train.config import Stage1Config
from jitlab.train.records import (
    file_sha256,
    read_jsonl,
    versions,
    write_json,
    write_jsonl,
)

__all__ = ["lora_config", "run_stage1", "training_arguments"]

DONE = "DONE"


def lora_config(cfg: Stage1Config):
    from peft import LoraConfig
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.target_modules, task_type="CAUSAL_LM")


def training_arguments(cfg: Stage1Config, phase: str, output_dir: Path) -> dict:
    """The TrainingArguments fields both phases share; CPU-safe precision and checkpointing from the config."""
    steps = cfg.sft_steps if phase == "sft" else cfg.dpo_steps
    epochs = cfg.sft_epochs if phase == "sft" else cfg.dpo_epochs
    return {
        "output_dir": str(output_dir), "max_length": cfg.max_length, "num_train_epochs": epochs,
        "max_steps": steps or -1,
        "learning_rate": cfg.sft_learning_rate if phase == "sft" else cfg.dpo_learning_rate,
        "per_device_train_batch_size": cfg.batch_size, "gradient_accumulation_steps": cfg.grad_accum,
        "warmup_steps": cfg.warmup_ratio, "lr_scheduler_type": cfg.lr_scheduler, "logging_steps": cfg.logging_steps,
        "save_strategy": "steps", "save_steps": cfg.save_steps, "save_total_limit": cfg.save_total_limit,
        "report_to": [r for r in cfg.reporters() if r != "none"] or "none", "bf16": cfg.bf16,
        "gradient_checkpointing": cfg.gradient_checkpointing, "use_cpu": cfg.use_cpu, "seed": cfg.seed,
        "data_seed": cfg.seed,
        "dataloader_num_workers": 0, "disable_tqdm": True}


def _check_reporters(cfg: Stage1Config) -> None:
    import importlib.util
    module = {"tensorboard": "tensorboard", "trackio": "trackio", "mlflow": "mlflow", "wandb": "wandb"}
    for name in cfg.reporters():
        if name in module and importlib.util.find_spec(module[name]) is None:
            raise ConfigError(f"--report-to {name}: the {name} package is not installed; pip install {name}, or use "
                              "report_to: tensorboard (installed with jitlab) or none")


def _load_data(cfg: Stage1Config) -> tuple[list[dict], list[dict], dict]:
    data = Path(cfg.data)
    sft_path, pairs_path = data / "sft.jsonl", data / "pairs.jsonl"
    if not sft_path.is_file():
        raise ConfigError(f"data {data}: no sft.jsonl; build it with `jitlab train data stage1 --out {data} ...`")
    sft = read_jsonl(sft_path)
    pairs = read_jsonl(pairs_path) if pairs_path.is_file() else []
    if not sft:
        raise ConfigError(f"{sft_path} holds no example; the teacher found no valid plan on the dev tasks given")
    bad = sorted({r.get("split") for r in sft + pairs} - {None, "dev", "train"})
    if bad:
        raise ConfigError(f"{data} holds examples of split(s) {', '.join(map(str, bad))}; Stage I trains on dev/train "
                          "tasks only: rebuild the data")
    hashes = {"sft.jsonl": file_sha256(sft_path), "pairs.jsonl": file_sha256(pairs_path)}
    return sft, pairs, hashes


def _fingerprint(cfg: Stage1Config, hashes: dict) -> dict:
    # what must not change for a resume to be the same run (logging and checkpoint cadence may)
    skip = {"save_steps", "save_total_limit", "logging_steps", "report_to", "threads"}
    return {"config": {k: v for k, v in asdict(cfg).items() if k not in skip}, "data": hashes}


def _fitting(tokenizer, rows: list[dict], max_length: int, phase: str, margin: int = 8) -> list[dict]:
    """The rows whose prompt leaves at least ``margin`` tokens of completion within ``max_length`` (TRL truncates
    from the end, so a longer prompt would train on nothing); ConfigError when none does."""
    def prompt_tokens(row):
        text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])
    lengths = [prompt_tokens(r) for r in rows]
    kept = [r for r, n in zip(rows, lengths) if n + margin <= max_length]
    if not kept:
        raise ConfigError(f"max_length {max_length} leaves no room for the plan in any {phase} example: the prompts "
                          f"are {min(lengths)}-{max(lengths)} tokens; raise max_length (or build the data with fewer "
                          "k_references)")
    if len(kept) < len(rows):
        import logging
        logging.getLogger(__name__).warning("%s: %d of %d examples dropped: prompt longer than max_length %d - %d",
                                            phase, len(rows) - len(kept), len(rows), max_length, margin)
    return kept


def _phase(name: str, out: Path, make_trainer, rows: list[dict], base: str, below: list[Path]) -> dict:
    """Train one phase (resuming from its newest checkpoint), save its adapter; returns its record.
    ``make_trainer(folder)`` returns (trainer, examples dropped as too long)."""
    from transformers.trainer_utils import get_last_checkpoint
    folder = out / name
    adapter = folder / "adapter"
    if (adapter / DONE).is_file():
        return json.loads((adapter / DONE).read_text())
    folder.mkdir(parents=True, exist_ok=True)
    resume = get_last_checkpoint(str(folder))
    start = time.perf_counter()
    trainer, dropped = make_trainer(folder)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(adapter))
    from jitlab.llm.adapters import write_base
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


def run_stage1(cfg: Stage1Config, out: str | Path) -> dict:
    """Run (or resume) Stage I into ``out``; returns the manifest (see the module docstring)."""
    if cfg.threads:
        import torch
        torch.set_num_threads(cfg.threads)
    _check_reporters(cfg)
    sft_rows, pairs, hashes = _load_data(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = _fingerprint(cfg, hashes)
    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        before = json.loads(manifest_path.read_text())
        if before.get("fingerprint") != fingerprint:
            raise ConfigDrift(f"{out} holds a Stage I run with another config or other data; choose a new --out "
                              "(or delete the folder) to start over")
    manifest = {"kind": "stage1", "config": asdict(cfg), "fingerprint": fingerprint, "data": hashes,
                "counts": {"sft": len(sft_rows), "pairs": len(pairs)}, "versions": versions(), "phases": {}}
    write_json(manifest_path, manifest)

    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    from jitlab.llm.hf import load_base

    def sft_trainer(folder: Path):
        tokenizer, model = load_base(cfg.base)
        rows = _fitting(tokenizer, sft_rows, cfg.max_length, "sft")
        dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
        args = SFTConfig(**training_arguments(cfg, "sft", folder), packing=False)
        return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=lora_config(cfg)), len(sft_rows) - len(rows)
    manifest["phases"]["sft"] = _phase("sft", out, sft_trainer, sft_rows, cfg.base, [])
    last = out / "sft" / "adapter"

    if cfg.dpo and pairs:
        def dpo_trainer(folder: Path):
            from peft import PeftModel
            tokenizer, model = load_base(cfg.base)
            model = PeftModel.from_pretrained(model, str(out / "sft" / "adapter")).merge_and_unload()
            rows = _fitting(tokenizer, pairs, cfg.max_length, "dpo")
            dataset = Dataset.from_list([{"prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"]}
                                         for r in rows])
            loss, weights = (["sigmoid", "sft"], [1.0, cfg.dpo_sft_weight]) if cfg.dpo_sft_weight else (["sigmoid"], None)
            args = DPOConfig(**training_arguments(cfg, "dpo", folder), beta=cfg.dpo_beta, loss_type=loss,
                             loss_weights=weights)
            return DPOTrainer(model=model, ref_model=None, args=args, train_dataset=dataset,
                              processing_class=tokenizer, peft_config=lora_config(cfg)), len(pairs) - len(rows)
        manifest["phases"]["dpo"] = _phase("dpo", out, dpo_trainer, pairs, cfg.base, [out / "sft" / "adapter"])
        last = out / "dpo" / "adapter"
    else:
        manifest["phases"]["dpo"] = {"phase": "dpo", "skipped": "dpo: false" if not cfg.dpo else "no pairs"}

    link = out / "adapter"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(last.relative_to(out), target_is_directory=True)
    manifest["adapter"] = str(last.relative_to(out))
    write_json(manifest_path, manifest)
    return manifest
