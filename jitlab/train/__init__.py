"""Training the meta-agent on Hugging Face TRL + peft (issue 12): the stages write records (JSONL + manifest.json),
train LoRA adapters with TRL's stock trainers, and produce adapters jitlab uses directly as backbones/generators.

    jitlab train data stage1 --runs runs/grid/* --bank runs/jit-tw/bank.sqlite --out runs/train/data1
    jitlab train stage1 --set data=runs/train/data1 --out runs/train/stage1        # CPU profile (config.py defaults)
    jitlab train data stage2 --set stage1_data=runs/train/data1 --out runs/train/data2
    jitlab train stage2 --set data=runs/train/data2 --set stage1=runs/train/stage1/adapter --out runs/train/stage2
    jitlab train stage3 --set policy=runs/train/stage2/adapter --out runs/train/stage3
    jitlab jit --suite textworld --generator plan:hf:runs/train/stage3/adapter ...
    jitlab train pipeline --config jitlab/train/configs/pipeline.yaml --out runs/pipeline/textworld  # all of the above

Built so far: Stage I (task-conditioned plan SFT, then Pareto-preference DPO) for the ``plan`` format
(:mod:`jitlab.jit.generate.plan`): data from an offline teacher (:mod:`jitlab.train.data`), training
(:mod:`jitlab.train.stage1`); Stage II's data from fault injection (:mod:`jitlab.train.faults`,
:mod:`jitlab.train.repair_data`) and training with held-out repair evaluation (:mod:`jitlab.train.stage2`);
Stage III, Evo-GDPO on TRL's GRPOTrainer with gated reward channels (:mod:`jitlab.train.evo`,
:mod:`jitlab.train.stage3`); the harness engineer of issue 13 (data from engineer loops, cold-start SFT, GRPO with Δ
success as the reward: :mod:`jitlab.train.engineer`). Shared phase/manifest helpers: :mod:`jitlab.train.common`.
The whole pipeline, resumable step by step: :mod:`jitlab.train.pipeline`, with held-out evaluations
(:mod:`jitlab.train.evaluate`) and figures read back from the records (:mod:`jitlab.train.report`).

TRL, peft and torch are imported inside functions, so ``import jitlab.train`` is cheap. On a CPU keep
``bf16`` and ``gradient_checkpointing`` off (TRL defaults both on); the configs do.
See README.md in this folder for one line per file.
"""
from jitlab.train.config import (
    EngineerDataConfig,
    EngineerGRPOConfig,
    EngineerSFTConfig,
    Stage1Config,
    Stage1DataConfig,
    Stage2Config,
    Stage2DataConfig,
    Stage3Config,
    load_config,
)

__all__ = ["EngineerDataConfig", "EngineerGRPOConfig", "EngineerSFTConfig", "Stage1Config", "Stage1DataConfig",
           "Stage2Config", "Stage2DataConfig", "Stage3Config", "load_config"]
