"""Training configs: one dataclass per stage, with ``help`` metadata, bounds checked by :mod:`jitlab.fields`,
loadable from YAML (``load_config``; every field is type-checked, as YAML and ``--set`` values arrive parsed).
The defaults are the CPU profile (SmolLM2-135M, ``bf16=False``,
``gradient_checkpointing=False``: TRL's own configs default both to True, which is slow or useless on a CPU);
``jitlab/train/configs/gpu/*.yaml`` are the GPU profile, shipped inside the package.

    cfg = load_config(Stage1Config, "jitlab/train/configs/gpu/stage1.yaml", data="runs/train/data1")
    jitlab train stage1 --config my.yaml --out runs/train/stage1 [--set sft_steps=2]
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from jitlab.errors import ConfigError
from jitlab.fields import CANDIDATES_MAX, REFERENCES_MAX, ROUNDS_MAX, SEED_MAX, STEPS_MAX, check_fields
from jitlab.run_options import EpisodeWall, Isolation, RunControls, SpendCaps, adjust

__all__ = ["CONFIG_DIR", "EngineerDataConfig", "EngineerGRPOConfig", "EngineerSFTConfig", "PatchRuns", "Stage1Config",
           "Stage1DataConfig", "Stage2Config", "Stage2DataConfig", "Stage3Config", "TrainingCommon", "load_config"]

CONFIG_DIR = Path(__file__).parent / "configs"
_REPORTERS = ("none", "tensorboard", "trackio", "mlflow", "wandb")
FORMATS = ["plan", "code"]

# upper bounds of the training counts that allocate per unit (jitlab.fields has the shared ones)
TOKENS_MAX = {"max": 131_072, "max_why": "one example's activations grow with its tokens"}
# the plan format's examples: the plan prompt (task, K references, the library's couplings) is 1.2-1.5k tokens of
# the embedded tokenizer since the couplings joined it (issue 30), a plan under 100: 1024 fit no example
PLAN_MAX_LENGTH = 2048
BATCH_MAX = {"max": 1024, "max_why": "each row holds max_length tokens of activations"}
RANK_MAX = {"max": 1024, "max_why": "the adapters' parameters grow with the rank"}
# the GRPO configs' micro_batch (Stage III and the engineer share check_micro_batch and this help)
MICRO_BATCH_HELP = ("completions per loss forward and backward, accumulated over the group (divides num_generations; "
                    "None: the whole group at once): peak memory scales with it, not with the group (CPU default 1: "
                    "a group of 4 plan prompts of 1.3-1.5k tokens in one forward took Stage III past 21 GB)")


def check_micro_batch(cfg) -> None:
    """A GRPO config's micro_batch must split its group evenly (TRL's generation batch holds whole groups)."""
    if cfg.micro_batch and cfg.num_generations % cfg.micro_batch:
        raise ConfigError(f"--micro-batch {cfg.micro_batch} does not divide --num-generations {cfg.num_generations}; "
                          "use a divisor of the group size (e.g. 1 or 2)")


def check_format(value: str) -> None:
    if value not in FORMATS:
        raise ConfigError(f"--format must be plan or code, got {value!r}")


@dataclass
class Stage1DataConfig(Isolation):
    """Stage I data (offline teacher): recorded runs and banks -> SFT examples and Pareto preference pairs."""
    runs: list = field(default_factory=list, metadata={"help": "run directories (jitlab run / jit) whose episodes "
                                                                "are the teacher's evidence"})
    banks: list = field(default_factory=list, metadata={"help": "bank files whose evaluations are evidence too "
                                                                "(compose search samples, JIT candidates)"})
    splits: list = field(default_factory=lambda: ["dev", "train"], metadata={
        "help": "task splits the data may come from; 'test' is refused (never train on test)"})
    k_references: int = field(default=3, metadata={"help": "references retrieved for each example's prompt (as at "
                                                             "inference)", "min": 0, **REFERENCES_MAX})
    smoke_steps: int = field(default=0, metadata={"help": "validation smoke steps per teacher harness (0: load and "
                                                           "interface check only)", "min": 0, **STEPS_MAX})
    max_pairs_per_task: int = field(default=8, metadata={"help": "preference pairs kept per task", "min": 0})
    examples_per_task: int = field(default=1, metadata={"help": "SFT examples per task: its best harnesses, "
                                                                "best first", "min": 1})
    format: str = field(default="plan", metadata={"help": "what the student writes: a JSON plan (plan:<backbone>) or "
                                                          "the harness files (code:<backbone>)", "choices": FORMATS})
    code_form: str = field(default="resolved", metadata={
        "help": "code targets: the files with the library code written out (resolved, 4.5-5k tokens) or as thin "
                "library subclasses (thin, ~800 tokens: fits a 135M model's 8k context beside the prompt)",
        "choices": ["resolved", "thin"]})
    code_references: int = field(default=1, metadata={"help": "references shown with their code in a code prompt "
                                                              "(code:<backbone>'s code_references)", "min": 0, **REFERENCES_MAX})

    def __post_init__(self):
        check_fields(self, typed=True)  # --set and YAML values arrive parsed, not as strings
        check_format(self.format)
        if self.code_form not in ("resolved", "thin"):
            raise ConfigError(f"--code-form must be resolved or thin, got {self.code_form!r}")
        held = [s for s in ("test", "holdout") if s in self.splits]
        if held:
            raise ConfigError(f"--splits must not include {held[0]!r}: the meta-agent is trained on dev (or train) "
                              "tasks only and evaluated on test and holdout")


@dataclass
class Stage2DataConfig(Isolation):
    """Stage II data: faults injected into valid harnesses (code format) and plans (plan format), each with its
    known-good fix, verified in the sandbox."""
    seeds: bool = field(default=True, metadata={"help": "the seed harnesses (baselines excluded) are inputs"})
    stage1_data: str | None = field(default=None, metadata={"help": "a Stage I data folder: its SFT plans (valid "
                                                                    "by construction) are inputs too"})
    only: list = field(default_factory=list, metadata={"help": "input names to use (seed names, stage1:<task id>; "
                                                                "default: all)"})
    formats: list = field(default_factory=lambda: ["code", "plan"], metadata={"help": "code and/or plan"})
    ops: list = field(default_factory=list, metadata={"help": "fault operators to use (default: all; see "
                                                              "jitlab.train.faults)"})
    suite: str = field(default="textworld", metadata={"help": "suite whose first dev task the smoke episodes run on "
                                                              "and the repair prompts show", "nonempty": True})
    smoke_steps: int = field(default=2, metadata={"help": "smoke episode steps (runtime faults show only there)",
                                                  "min": 1, **STEPS_MAX})
    heldout_seeds: list = field(default_factory=lambda: ["roma", "gam"], metadata={
        "help": "inputs whose faults form the held-out split (evaluation, not training)"})
    heldout_ops: list = field(default_factory=lambda: ["view_returns_str", "param_type"], metadata={
        "help": "operators whose faults form the held-out split"})

    def __post_init__(self):
        check_fields(self, typed=True)  # --set and YAML values arrive parsed, not as strings
        bad = sorted(set(self.formats) - {"code", "plan"})
        if bad or not self.formats:
            raise ConfigError(f"--formats must be code and/or plan, got {self.formats!r}")


@dataclass
class TrainingCommon:
    """What every training stage shares: the policy backbone, lengths, batch, LoRA, checkpoints, tracker, precision."""
    base: str = field(default="embedded", metadata={"help": "policy backbone: embedded or hf:<local dir>",
                                                    "nonempty": True})
    max_length: int = field(default=1024, metadata={"help": "tokens per example (prompt + completion)", "min": 16, **TOKENS_MAX})
    batch_size: int = field(default=1, metadata={"help": "per-device batch size", "min": 1, **BATCH_MAX})
    grad_accum: int = field(default=4, metadata={"help": "gradient accumulation steps", "min": 1})
    warmup_ratio: float = field(default=0.1, metadata={"help": "share of steps warming up the learning rate "
                                                               "(floor(ratio x steps), never every step: a 1-step "
                                                               "run has none)", "min": 0, "max": 1})
    lr_scheduler: str = field(default="cosine", metadata={"help": "transformers scheduler name", "nonempty": True})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank", "min": 1, **RANK_MAX})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha", "min": 1})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout", "min": 0, "max": 1})
    target_modules: str = field(default="all-linear", metadata={"help": "LoRA target modules (peft)",
                                                                "nonempty": True})
    save_steps: int = field(default=10, metadata={"help": "checkpoint every N optimizer steps: a killed run resumes "
                                                          "from the last one", "min": 1})
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept", "min": 1})
    logging_steps: int = field(default=1, metadata={"help": "log every N steps", "min": 1})
    report_to: str = field(default="tensorboard", metadata={"help": "TRL/transformers tracker: tensorboard, trackio, "
                                                                    "mlflow, wandb or none (comma-separated)"})
    bf16: bool = field(default=False, metadata={"help": "bfloat16 training (GPU; slow on CPU)"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "recompute activations (saves GPU memory, "
                                                                          "costs ~20% time)"})
    use_cpu: bool = field(default=True, metadata={"help": "train on the CPU even when a GPU is visible"})
    threads: int | None = field(default=None, metadata={"help": "torch CPU threads (default: torch's)", "min": 1})
    seed: int = field(default=0, metadata={"help": "seed of data order, LoRA init and dropout", "min": 0,
                                           "max": SEED_MAX})

    def __post_init__(self):
        check_fields(self, typed=True)  # --set and YAML values arrive parsed, not as strings
        bad = [r for r in self.reporters() if r not in _REPORTERS]
        if bad:
            raise ConfigError(f"--report-to {self.report_to!r}: unknown tracker {bad[0]!r}; use "
                              f"{', '.join(_REPORTERS)}")

    def reporters(self) -> list[str]:
        return [r.strip() for r in self.report_to.split(",") if r.strip()] or ["none"]


@dataclass
class Stage1Config(TrainingCommon):
    """Stage I training: SFT on teacher plans (completion-only loss), then DPO on Pareto pairs, LoRA via peft."""
    data: str = field(default="", metadata={"help": "folder written by `jitlab train data stage1` (sft.jsonl, "
                                                    "pairs.jsonl)", "nonempty": True})
    sft_epochs: float = field(default=2.0, metadata={"help": "SFT epochs (when sft_steps is not set)",
                                                     "min_exclusive": 0})
    sft_steps: int | None = field(default=None, metadata={"help": "SFT optimizer steps (overrides sft_epochs)",
                                                          "min": 1})
    sft_learning_rate: float = field(default=2e-4, metadata={"help": "SFT learning rate", "min_exclusive": 0})
    dpo: bool = field(default=True, metadata={"help": "run the DPO step after SFT (skipped when there are no pairs)"})
    dpo_epochs: float = field(default=1.0, metadata={"help": "DPO epochs (when dpo_steps is not set)",
                                                     "min_exclusive": 0})
    dpo_steps: int | None = field(default=None, metadata={"help": "DPO optimizer steps (overrides dpo_epochs)",
                                                          "min": 1})
    dpo_learning_rate: float = field(default=5e-5, metadata={"help": "DPO learning rate", "min_exclusive": 0})
    dpo_beta: float = field(default=0.1, metadata={"help": "DPO beta (strength of the implicit KL)",
                                                   "min_exclusive": 0})
    dpo_sft_weight: float = field(default=0.2, metadata={"help": "weight of the NLL-on-chosen term next to the "
                                                                 "sigmoid DPO loss (RPO-style; 0: plain DPO)", "min": 0})
    max_length: int = field(default=PLAN_MAX_LENGTH, metadata={"help": "tokens per example (prompt + plan): a plan "
                                                                        "prompt with its references and couplings is "
                                                                        "1.2-1.5k tokens", "min": 16, **TOKENS_MAX})


@dataclass
class Stage2Config(TrainingCommon, Isolation):
    """Stage II training: SFT on repair transitions (completion-only loss on the fix), on top of a Stage I adapter when
    given; then repair success within ``eval_rounds`` rounds on the held-out faults."""
    data: str = field(default="", metadata={"help": "folder written by `jitlab train data stage2` (repairs.jsonl)",
                                                    "nonempty": True})
    stage1: str | None = field(default=None, metadata={"help": "a Stage I adapter folder (e.g. runs/train/s1/adapter): "
                                                               "trained on top of it (its base replaces --base)"})
    formats: list = field(default_factory=lambda: ["plan"], metadata={
        "help": "repair formats trained on: plan and/or code (code prompts are ~3k tokens: GPU profile)"})
    rehearsal: str | None = field(default=None, metadata={
        "help": "a Stage I data folder whose best SFT example per task is trained on beside the repairs, so the policy "
                "keeps writing Stage I's preferred plan on a plan prompt (the pipeline passes its own Stage I data)"})
    epochs: float = field(default=2.0, metadata={"help": "SFT epochs (when steps is not set)", "min_exclusive": 0})
    steps: int | None = field(default=None, metadata={"help": "SFT optimizer steps (overrides epochs)", "min": 1})
    learning_rate: float = field(default=2e-4, metadata={"help": "SFT learning rate", "min_exclusive": 0})
    eval: bool = field(default=True, metadata={"help": "evaluate repair on the held-out faults after training"})
    eval_rounds: int = field(default=2, metadata={"help": "repair rounds allowed in the evaluation", "min": 1, **ROUNDS_MAX})
    eval_limit: int | None = field(default=None, metadata={"help": "held-out faults evaluated at most (default: all)",
                                                           "min": 1})
    eval_executor: str = field(default="scripted:pick-first", metadata={
        "help": "backbone of the validation smoke episodes (a test double by default: the faults do not depend on "
                "its replies)", "nonempty": True})
    max_length: int = field(default=PLAN_MAX_LENGTH, metadata={"help": "tokens per example (prompt + fix): a plan "
                                                                        "repair prompt is the plan prompt and the "
                                                                        "broken plan with its diagnostic",
                                                                "min": 16, **TOKENS_MAX})

    def __post_init__(self):
        super().__post_init__()
        bad = sorted(set(self.formats) - {"code", "plan"})
        if bad or not self.formats:
            raise ConfigError(f"--formats must be code and/or plan, got {self.formats!r}")


def _coerce(f: dataclasses.Field, text: str):
    """A ``--set key=value`` string as a YAML scalar (2, 0.5, true, null; load_config reads 2e-4 as a number)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {f.name}={text!r} does not parse ({exc})") from exc


def _as_float(text: str):
    """``text`` as a float when it spells one (2e-4, 1E-5), else unchanged (the field's check names it)."""
    try:
        return float(text)
    except ValueError:
        return text


def load_config(cls, path: str | Path | None = None, overrides: dict | None = None, **values):
    """``cls`` from a YAML mapping (``path``), then ``values``, then ``overrides`` ({field: YAML text}, the CLI's
    ``--set``). Unknown keys and bad values are one-line ConfigErrors naming the file or option."""
    known = {f.name: f for f in fields(cls)}
    data: dict = {}
    if path is not None:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            raise ConfigError(f"--config {path}: no such file") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--config {path} is not valid YAML ({exc})") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"--config {path} must be a YAML mapping of {cls.__name__} fields")
    for key, text in (overrides or {}).items():
        if key in known:
            data[key] = _coerce(known[key], text)
        else:
            data[key] = text
    data.update({k: v for k, v in values.items() if v is not None})
    unknown = sorted(set(data) - set(known))
    if unknown:
        where = f"--config {path}" if path is not None else cls.__name__
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    for key, value in data.items():
        if "float" in str(known[key].type) and isinstance(value, str):
            data[key] = value = _as_float(value)   # YAML 1.1 reads 2e-4 (no dot) as a string
        if "bool" in str(known[key].type) and not isinstance(value, bool):
            raise ConfigError(f"--{key.replace('_', '-')} must be true or false, got {value!r}")
        if "list" in str(known[key].type) and not isinstance(value, list):
            data[key] = [value]
    try:
        return cls(**data)
    except TypeError as exc:
        raise ConfigError(f"{cls.__name__}: {exc}") from exc


@dataclass
class Stage3Config(TrainingCommon, SpendCaps, EpisodeWall, Isolation):
    """Stage III (Evo-GDPO): GRPO on the plan (or code) format with the gated, decoupled reward channels of
    jitlab.train.evo; candidates validated and run in the sandbox against the family's incumbent; conservative bank
    update."""
    policy: str | None = field(default=None, metadata={"help": "adapter to start from (Stage II or I: "
                                                               "runs/train/s2/adapter); default: the bare --base"})
    suite: str = field(default="textworld", metadata={"help": "suite whose training tasks are sampled",
                                                      "nonempty": True})
    split: str = field(default="dev", metadata={"help": "task split (dev or train; never test)", "choices": ["dev", "train"]})
    tasks: int | None = field(default=None, metadata={"help": "training tasks at most (default: all of the split)",
                                                      "min": 1})
    steps: int = field(default=6, metadata={"help": "GRPO optimizer steps", "min": 1})
    learning_rate: float = field(default=1e-5, metadata={"help": "GRPO learning rate (LoRA)", "min_exclusive": 0})
    num_generations: int = field(default=4, metadata={"help": "group size G: candidates sampled per task", "min": 2,
                                                      **CANDIDATES_MAX})
    max_completion_length: int = field(default=96, metadata={"help": "tokens per sampled plan", "min": 8, **TOKENS_MAX})
    micro_batch: int | None = field(default=1, metadata={"help": MICRO_BATCH_HELP, "min": 1, **CANDIDATES_MAX})
    k_references: int = field(default=3, metadata={"help": "references from the starting bank in each plan prompt "
                                                             "(as Stage I's data and JIT inference)", "min": 0, **REFERENCES_MAX})
    format: str = field(default="plan", metadata={"help": "what the policy samples: plans or harness files (code)",
                                                  "choices": FORMATS})
    code_references: int = field(default=1, metadata={"help": "references shown with their code in a code prompt "
                                                              "(as Stage I's data)", "min": 0, **REFERENCES_MAX})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the group", "min_exclusive": 0})
    beta: float = field(default=0.0, metadata={"help": "KL weight (0: no reference model, TRL's default)", "min": 0})
    num_iterations: int = field(default=1, metadata={"help": "clipped updates per generated group (mu)", "min": 1})
    epsilon: float = field(default=0.2, metadata={"help": "PPO clip range", "min_exclusive": 0})
    weights: list = field(default_factory=lambda: [0.25, 1.0, 0.25, 0.25], metadata={
        "help": "reward_weights of the channels valid, task_delta, latency_gain, cost_gain"})
    dead_band: float = field(default=0.05, metadata={"help": "|log ratio| below which an efficiency gain counts 0",
                                                     "min": 0})
    latency_proxy: str = field(default="calls", metadata={"help": "deterministic latency proxy: backbone calls or "
                                                                  "decoded tokens per task", "choices": ["calls", "tokens"]})
    executor: str = field(default="embedded", metadata={"help": "frozen backbone that runs the candidates' episodes",
                                                        "nonempty": True})
    episode_steps: int = field(default=5, metadata={
        "help": "step cap of each evaluation episode (0: the task's own step budget)", "min": 0, **STEPS_MAX})
    smoke_steps: int = field(default=2, metadata={"help": "validation smoke steps", "min": 0, **STEPS_MAX})
    fallback_incumbent: str = field(default="react", metadata={
        "help": "seed that stands as incumbent for a family the bank has no evaluation of", "nonempty": True})
    bank_admission: str = field(default="gate", metadata={
        "help": "which gated-in candidates enter the bank (jitlab/selection.py): gate (the GRPO gate on its one task, "
                "as before) | screen (none: the gate only shapes rewards) | confirm (the gate again on another task "
                "of the family)", "choices": ["gate", "screen", "confirm"]})
    bank: str | None = field(default=None, metadata={"help": "bank to start from (copied into the run folder; "
                                                             "default: a fresh B0 of the seed harnesses)"})

    def __post_init__(self):
        if self.split not in ("dev", "train"):  # before the generic choices check, to say why
            raise ConfigError(f"--split must be dev or train, got {self.split!r}: the meta-agent never trains on test")
        super().__post_init__()
        check_format(self.format)
        if self.latency_proxy not in ("calls", "tokens"):
            raise ConfigError(f"--latency-proxy must be calls or tokens, got {self.latency_proxy!r}")
        if len(self.weights) != 4:
            raise ConfigError(f"--weights needs 4 numbers (valid, task_delta, latency_gain, cost_gain), got {self.weights!r}")
        check_micro_batch(self)


@dataclass
class EngineerDataConfig:
    """Engineer training data (issue 13): engineer-loop output folders -> (packet -> patch) SFT examples of validated,
    non-regressive patches, and the packets as GRPO prompts."""
    loops: list = field(default_factory=list, metadata={"help": "engineer-loop output folders (`jitlab engineer run "
                                                                 "--out`: candidates.jsonl, summary.json)"})
    min_delta: float = field(default=0.0, metadata={"help": "a patch is an SFT example when valid and Δ >= this "
                                                             "(0: non-regressive)", "min": -1, "max": 1})
    per_packet: int = field(default=2, metadata={"help": "SFT examples per packet at most, largest Δ first (Δ > 0 "
                                                         "before Δ = 0)", "min": 1})

    def __post_init__(self):
        check_fields(self, typed=True)  # --set and YAML values arrive parsed, not as strings


@dataclass
class EngineerSFTConfig(TrainingCommon):
    """Engineer cold start: SFT on (packet prompt -> patch), completion-only loss on the patch, a LoRA adapter usable as
    the loop's engineer (``--engineer hf:<out>/adapter``)."""
    data: str = field(default="", metadata={"help": "folder written by `jitlab train engineer data` (sft.jsonl)",
                                            "nonempty": True})
    max_length: int = field(default=3072, metadata={"help": "tokens per example (a TextWorld packet prompt is 2.0-2.2k "
                                                            "tokens, a patch 60-160)", "min": 16, **TOKENS_MAX})
    epochs: float = field(default=2.0, metadata={"help": "SFT epochs (when steps is not set)", "min_exclusive": 0})
    steps: int | None = field(default=None, metadata={"help": "SFT optimizer steps (overrides epochs)", "min": 1})
    learning_rate: float = field(default=2e-4, metadata={"help": "SFT learning rate", "min_exclusive": 0})


@dataclass
@adjust(defaults={"concurrency": 6})
class PatchRuns(RunControls, EpisodeWall, Isolation):
    """How the engineer GRPO's patch runs go (jitlab.train.engineer.PatchEvaluator): episodes at once, retries, the
    wall budget of each episode, the spend caps of all of them together, isolation."""


@dataclass
class EngineerGRPOConfig(TrainingCommon, PatchRuns):
    """Engineer GRPO: K patches sampled per packet, reward = Δ success of the patched harness on the packet's batch
    (validated and re-run in the sandbox as the engineer loop does); TRL normalises the rewards within each group."""
    data: str = field(default="", metadata={"help": "folder written by `jitlab train engineer data` (packets.jsonl)",
                                            "nonempty": True})
    # measured on the CPU, 2 steps of 16 patches sampled on a 2.2k-token packet prompt: without recomputation the run
    # passed 21.5 GB and was killed by the OOM killer; with it, it finished at 17.2 GB max RSS
    gradient_checkpointing: bool = field(default=True, metadata={"help": "recompute activations (on by default here: "
                                                                         "long packet prompts)"})
    policy: str | None = field(default=None, metadata={"help": "adapter to start from (the cold start: "
                                                               "runs/train/eng-sft/adapter); default: the bare --base"})
    packets: int | None = field(default=None, metadata={"help": "packets used at most (default: all)", "min": 1})
    steps: int = field(default=4, metadata={"help": "GRPO optimizer steps", "min": 1})
    learning_rate: float = field(default=1e-5, metadata={"help": "GRPO learning rate (LoRA)", "min_exclusive": 0})
    num_generations: int = field(default=4, metadata={"help": "group size K: patches sampled per packet", "min": 2,
                                                      **CANDIDATES_MAX})
    max_completion_length: int = field(default=256, metadata={"help": "tokens per sampled patch", "min": 8, **TOKENS_MAX})
    micro_batch: int | None = field(default=1, metadata={"help": MICRO_BATCH_HELP, "min": 1, **CANDIDATES_MAX})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the group", "min_exclusive": 0})
    beta: float = field(default=0.0, metadata={"help": "KL weight (0: no reference model, TRL's default)", "min": 0})
    num_iterations: int = field(default=1, metadata={"help": "clipped updates per generated group (mu)", "min": 1})
    epsilon: float = field(default=0.2, metadata={"help": "PPO clip range", "min_exclusive": 0})
    invalid_reward: float = field(default=-1.0, metadata={"help": "reward of a patch that fails validation (<= -1, "
                                                                  "the lowest Δ: never above a valid patch)", "max": -1})

    def __post_init__(self):
        super().__post_init__()
        check_micro_batch(self)
