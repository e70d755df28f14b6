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

from dataclasses import asdict
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.llm.hf import load_base
from jitlab.train import common
from jitlab.train.common import fingerprint, fitting, link_adapter, lora_config, open_run, sole_folder, train_phase
from jitlab.train.config import Stage1Config
from jitlab.train.records import file_sha256, read_jsonl, write_json

__all__ = ["lora_config", "run_stage1", "training_arguments"]


def training_arguments(cfg: Stage1Config, phase: str, output_dir: Path, examples: int | None = None) -> dict:
    """The TrainingArguments of phase ``sft`` or ``dpo`` (jitlab.train.common.training_arguments)."""
    if phase == "sft":
        return common.training_arguments(cfg, output_dir, cfg.sft_steps, cfg.sft_epochs, cfg.sft_learning_rate,
                                         examples)
    return common.training_arguments(cfg, output_dir, cfg.dpo_steps, cfg.dpo_epochs, cfg.dpo_learning_rate, examples)


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


@sole_folder("Stage I")
def run_stage1(cfg: Stage1Config, out: str | Path) -> dict:
    """Run (or resume) Stage I into ``out``; returns the manifest (see the module docstring)."""
    if cfg.threads:
        import torch
        torch.set_num_threads(cfg.threads)
    common.check_reporters(cfg)
    sft_rows, pairs, hashes = _load_data(cfg)
    out = Path(out)
    manifest_path = out / "manifest.json"
    manifest = open_run(out, "stage1", fingerprint(cfg, hashes), {
        "config": asdict(cfg), "data": hashes, "counts": {"sft": len(sft_rows), "pairs": len(pairs)}})

    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer


    def sft_trainer(folder: Path):
        tokenizer, model = load_base(cfg.base)
        rows = fitting(tokenizer, sft_rows, cfg.max_length, "sft")
        dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
        args = SFTConfig(**training_arguments(cfg, "sft", folder, len(rows)), packing=False)
        return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=lora_config(cfg)), len(sft_rows) - len(rows)
    manifest["phases"]["sft"] = train_phase("sft", out, sft_trainer, sft_rows, cfg.base, [])
    last = out / "sft" / "adapter"

    if cfg.dpo and pairs:
        def dpo_trainer(folder: Path):
            from peft import PeftModel
            tokenizer, model = load_base(cfg.base)
            model = PeftModel.from_pretrained(model, str(out / "sft" / "adapter")).merge_and_unload()
            rows = fitting(tokenizer, pairs, cfg.max_length, "dpo")
            dataset = Dataset.from_list([{"prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"]}
                                         for r in rows])
            loss, weights = (["sigmoid", "sft"], [1.0, cfg.dpo_sft_weight]) if cfg.dpo_sft_weight else (["sigmoid"], None)
            args = DPOConfig(**training_arguments(cfg, "dpo", folder, len(rows)), beta=cfg.dpo_beta, loss_type=loss,
                             loss_weights=weights)
            return DPOTrainer(model=model, ref_model=None, args=args, train_dataset=dataset,
                              processing_class=tokenizer, peft_config=lora_config(cfg)), len(pairs) - len(rows)
        manifest["phases"]["dpo"] = train_phase("dpo", out, dpo_trainer, pairs, cfg.base, [out / "sft" / "adapter"])
        last = out / "dpo" / "adapter"
    else:
        manifest["phases"]["dpo"] = {"phase": "dpo", "skipped": "dpo: false" if not cfg.dpo else "no pairs"}

    manifest["adapter"] = link_adapter(out, last)
    write_json(manifest_path, manifest)
    return manifest
