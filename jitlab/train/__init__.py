"""Training the meta-agent on Hugging Face TRL + peft (issue 12): the stages write records (JSONL + manifest.json),
train LoRA adapters with TRL's stock trainers, and produce adapters jitlab uses directly as backbones/generators.

    jitlab train data stage1 --runs runs/grid/* --bank runs/jit-tw/bank.sqlite --out runs/train/data1
    jitlab train stage1 --set data=runs/train/data1 --out runs/train/stage1        # CPU profile (config.py defaults)
    jitlab jit --suite textworld --generator plan:hf:runs/train/stage1/adapter ...

Built so far: Stage I (task-conditioned plan SFT, then Pareto-preference DPO) for the ``plan`` format
(:mod:`jitlab.jit.generate.plan`): data from an offline teacher (:mod:`jitlab.train.data`), training
(:mod:`jitlab.train.stage1`); Stage II's data from fault injection (:mod:`jitlab.train.faults`,
:mod:`jitlab.train.repair_data`). Stage II training and Stage III (Evo-GDPO) are to come.

TRL, peft and torch are imported inside functions, so ``import jitlab.train`` is cheap. On a CPU keep
``bf16`` and ``gradient_checkpointing`` off (TRL defaults both on); the configs do.
See README.md in this folder for one line per file.
"""
from jitlab.train.config import (
    Stage1Config,
    Stage1DataConfig,
    Stage2DataConfig,
    load_config,
)

__all__ = ["Stage1Config", "Stage1DataConfig", "Stage2DataConfig", "load_config"]
