"""Stage III training (Evo-GDPO): GRPO on the ``plan`` (or ``code``) format with TRL's ``GRPOTrainer``, the gated and
decoupled reward channels of :mod:`jitlab.train.evo`, candidates validated and run in the sandbox, and a conservative
bank update.

    from jitlab.train.stage3 import run_stage3
    run_stage3(load_config(Stage3Config, policy="runs/train/s2/adapter", suite="textworld"), "runs/train/s3")
    jitlab train stage3 --set policy=runs/train/s2/adapter --set steps=6 --out runs/train/s3

Per step: one training task (of ``split``, never test), its plan prompt (``plan:<backbone>``'s own, with the
``k_references`` references the starting bank retrieves for the task, as in Stage I's data and at inference), G
sampled plans (with ``format: code``: ``code:<backbone>``'s prompt and G sampled file sets, the files a reply lacks
taken from the first reference). Each plan is parsed and rendered (``plan_files``), validated in the sandbox
(``validate_files``, a smoke episode on a sibling dev task) and, when valid, run for ``episode_steps`` steps (0: the
task's own budget) on the task in the sandbox with the frozen ``executor`` (replay cache on). The family's incumbent
(``Bank.incumbent``; ``fallback_incumbent`` seed when the bank has none) is run the same way on the same task and
seed. Evaluations are cached by (harness sha, task, seed) in ``evaluations.json``, so repeated plans and incumbents
cost nothing. Channels and gating: jitlab.train.evo. The latency channel uses a deterministic proxy (backbone calls,
or decoded tokens, per task), never wall seconds.

Bank (``out/bank.sqlite``, a fresh B0 or a copy of ``bank``): the incumbent's evaluation is recorded; a gated-in
candidate (valid, keeps or beats the incumbent's reward) is admitted under ``bank_admission`` (``gate``, the default
and the earlier behaviour: on that one task; ``screen``: never, the gate only shapes the rewards; ``confirm``: only
when it passes the gate again against the incumbent on the next training task of the family, both run there); an
admitted candidate changes the bank only when it advances the frontier (``Bank.advances``: no frontier member weakly
dominates it, so a tie leaves the incumbent in place and adds nothing), and is then added with the incumbent as parent
and recorded. Each completions.jsonl row records the verdicts (``admission``, ``advances``) and its GRPO ``group``.
That changes later incumbents: the evolutionary part.

Signal: ``summary.groups`` is the share of GRPO groups with non-zero advantage (jitlab.train.evo.signal_share; also
``nonzero_advantage_share`` per step in the logs); ``frontier_before`` / ``frontier_after`` the bank's frontier at the
start and the end.

Files: ``grpo/`` (checkpoints, ``runs/`` TensorBoard, log_history.jsonl with TRL's ``rewards/<channel>/mean``,
``frac_reward_zero_std``, ...; adapter/), ``adapter`` -> grpo/adapter, ``completions.jsonl`` (one row per candidate:
task, sha, channels, gate, outcome, incumbent, bank result), ``evaluations.json``, ``bank.sqlite``, ``manifest.json``.
Resumable as Stages I and II (jitlab.train.common); evaluations already cached are not rerun.
"""
from __future__ import annotations

import json
import shutil
import threading
from dataclasses import asdict
from pathlib import Path

from jitlab.envs.base import checked_tasks, get_suite
from jitlab.errors import ConfigError
from jitlab.harness import harness_sha, read_files, seed_bank_dir
from jitlab.jit.bank import Bank, Evaluation
from jitlab.jit.generate import references
from jitlab.jit.generate.blocks import parse_blocks
from jitlab.jit.generate.code import complete_files
from jitlab.jit.generate.plan import PlanError, parse_plan, plan_files
from jitlab.jit.repair import RepairConfig, dev_task_for, validate_files, write_harness
from jitlab.llm import get_backbone
from jitlab.llm.adapters import adapter_chain, is_adapter_dir, load_adapter
from jitlab.llm.cache import default_cache
from jitlab.llm.hf import load_base
from jitlab.runner import sandboxed_episode
from jitlab.runtime import Budget, LLMHandle, SpendCapReached
from jitlab.train import common
from jitlab.train.common import fingerprint, link_adapter, lora_config, open_run, sole_folder, train_phase
from jitlab.train.config import Stage3Config
from jitlab.train.evo import ChannelRewards, Outcome, grpo_aggregation, signal_share
from jitlab.train.records import file_sha256, write_json, write_jsonl

__all__ = ["PlanEvaluator", "completion_text", "generation_rows", "grpo_batching", "grpo_trainer", "policy_chain",
           "prompt_rows", "run_stage3"]


def completion_text(completion) -> str:
    """The text of a TRL completion (a string, or conversational: a list of messages)."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


class PlanEvaluator:
    """Validate and run plans / harness files in the sandbox, cached by (sha, task, seed) in ``cache_path``."""

    def __init__(self, suite, executor, cfg: Stage3Config, workdir: Path, replay=None):
        self.suite, self.executor, self.cfg, self.workdir, self.replay = suite, executor, cfg, workdir, replay
        self.generator = f"{cfg.format}:stage3"
        self.cache_path = workdir / "evaluations.json"
        self.cache = json.loads(self.cache_path.read_text()) if self.cache_path.is_file() else {}
        self.files: dict[str, dict] = {}
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        # the caps bound the whole stage: every validation and episode, counted with what the cached evaluations spent
        self.spend = cfg.command_spend(workdir)
        if self.spend is not None:
            self.spend.add(sum(float(o.get("cost") or 0) for o in self.cache.values()),
                           sum(int((o.get("meta") or {}).get("tokens") or 0) for o in self.cache.values()))

    def plan(self, text: str, task, nearest: dict | None = None) -> Outcome:
        """Validate and run a sampled completion: a plan, or (``cfg.format`` code) harness files as ``<file name=...>``
        blocks, the files it lacks taken from ``nearest`` (the prompt's first reference), as ``code:<backbone>`` does."""
        try:
            files = (plan_files(parse_plan(text), self.generator) if self.cfg.format == "plan"
                     else _code_files(text, nearest))
        except PlanError as exc:
            return Outcome(False, meta={"sha": None, "parsed": False, "kind": "parse_error", "error": str(exc)[:200]})
        return self.harness(files, task)

    def harness(self, files: dict, task) -> Outcome:
        sha = harness_sha(files)
        self.files[sha] = files
        key = f"{sha}|{task.id}|{self.cfg.seed}"
        with self._lock:
            if key in self.cache:
                self.hits += 1
                return Outcome(**{**self.cache[key], "meta": {**self.cache[key]["meta"], "cache_hit": True}})
            self.misses += 1
        if self.spend is not None:
            self.spend.check()   # SpendCapReached: no new evaluation once a cap is reached
        out = self._run(files, sha, task)
        if self.spend is not None and self.spend.stopped:   # cut short by the cap: not a result, never cached
            raise SpendCapReached(f"{self.workdir}: {self.spend.stopped}; rerun to resume (with a higher --set "
                                  "max_cost / max_tokens_total when a spend cap stopped it)")
        with self._lock:
            self.cache[key] = vars(out)
            write_json(self.cache_path, self.cache)
        return Outcome(**{**vars(out), "meta": {**out.meta, "cache_hit": False}})

    def _run(self, files: dict, sha: str, task) -> Outcome:
        cfg = self.cfg
        config = RepairConfig(max_rounds=0, smoke_steps=cfg.smoke_steps, allow_unisolated=cfg.allow_unisolated)
        select = LLMHandle(self.executor, Budget(max_tokens=10 ** 6), self.replay, seed=cfg.seed, phase="select",
                           spend=self.spend)
        check = validate_files(files, dev_task_for(self.suite, task), self.suite, select, config,
                               self.workdir / "validate")
        meta = {"sha": sha, "parsed": True, "kind": (check.diagnostic or {}).get("kind")}
        if not check.ok:
            return Outcome(False, meta=meta)
        folder = write_harness(files, self.workdir / "harnesses" / sha)
        llm = LLMHandle(self.executor, Budget(max_tokens=10 ** 6), self.replay, seed=cfg.seed, phase="execute",
                        spend=self.spend)
        budget = Budget(max_steps=cfg.episode_steps or None, max_wall_s=cfg.max_wall_s)   # 0: the task's own
        result, _ = sandboxed_episode(self.suite, task, folder, llm, budget, cfg.seed, config.sandbox())
        latency = llm.calls if cfg.latency_proxy == "calls" else llm.completion_tokens
        meta.update(status=result.status, success=result.success, tokens=llm.tokens, calls=llm.calls,
                    tool_calls=result.tool_calls, wall_s=round(result.wall_s, 3))
        return Outcome(True, float(result.reward), float(latency), float(llm.cost), meta)


def _code_files(text: str, nearest: dict | None) -> dict:
    parsed = parse_blocks(text)
    if not parsed:
        raise PlanError("the reply held no <file name=...> block, so no file was written")
    return complete_files(parsed, nearest or {})


def generation_rows(rows: list[dict], cfg: Stage3Config) -> list[dict]:
    """``rows`` cycled to fill at least one generation batch: GRPOTrainer's sampler takes ``grad_accum`` distinct
    prompts per optimizer step (a generation batch of ``grad_accum`` groups, :func:`grpo_batching`) and drops an
    incomplete chunk, so fewer tasks than ``grad_accum`` would train zero steps."""
    return [rows[i % len(rows)] for i in range(max(len(rows), cfg.grad_accum))]


def _tasks(suite, cfg: Stage3Config) -> list:
    tasks = checked_tasks(suite, cfg.split)
    if not tasks:
        raise ConfigError(f"suite {cfg.suite} has no {cfg.split} task to train on")
    return tasks[:cfg.tasks] if cfg.tasks else tasks


def prompt_rows(tasks, bank, k: int, fmt: str = "plan", code_references: int = 1) -> list[dict]:
    """One row per task: its ``fmt`` prompt with the ``k`` references ``bank`` retrieves (Stage I's prompt), and the
    first reference's files (``nearest``: what a code reply's missing files are taken from)."""
    generator = common.policy_generator(fmt, code_references=code_references)
    rows = []
    for t in tasks:
        refs = references(bank, t.description, k)
        rows.append({"prompt": generator.messages(t.public(), refs), "task_id": t.id,
                     "nearest": refs[0].files if refs else {}})
    return rows


def admission(rule: str, evaluator, bank, tasks: list, task, sha: str, incumbent_sha: str) -> dict:
    """Whether a gated-in candidate ``sha`` enters the bank under ``rule`` (see the module docstring): the verdict as
    ``{rule, admitted, reason}``; ``confirm`` runs the candidate and the incumbent on the family's next task."""
    if rule == "gate":
        return {"rule": rule, "admitted": True, "reason": f"kept or beat the incumbent on {task.id}"}
    if rule == "screen":
        return {"rule": rule, "admitted": False, "reason": "a screen only rejects: the bank is not changed"}
    same = [t for t in tasks if t.family == task.family and t.id != task.id]
    if not same:
        return {"rule": rule, "admitted": False, "reason": f"no other training task of family {task.family} to confirm on"}
    other = next((t for t in same if t.id > task.id), same[0])
    cand = evaluator.harness(evaluator.files[sha], other)
    inc = evaluator.harness(bank.files(incumbent_sha), other)
    ok = bool(cand.valid) and cand.reward >= inc.reward
    return {"rule": rule, "admitted": ok, "confirm_task": other.id, "reward": cand.reward, "incumbent_reward": inc.reward,
            "reason": f"on {other.id}: reward {cand.reward:.2f} vs the incumbent's {inc.reward:.2f}: "
                      f"{'admitted' if ok else 'rejected'}"}


@sole_folder("Stage III")
def run_stage3(cfg: Stage3Config, out: str | Path) -> dict:
    """Run (or resume) Stage III into ``out``; returns the manifest (see the module docstring)."""
    if cfg.threads:
        import torch
        torch.set_num_threads(cfg.threads)
    common.check_reporters(cfg)
    suite = get_suite(cfg.suite)
    tasks = _tasks(suite, cfg)
    by_id = {t.id: t for t in tasks}
    out = Path(out)
    base, below = policy_chain(cfg, "a Stage II or I run's adapter, e.g. runs/train/s2/adapter")
    hashes = {"policy": [file_sha256(Path(b) / "adapter_model.safetensors") for b in below],
              "bank": file_sha256(cfg.bank) if cfg.bank else None}
    fp = fingerprint(cfg, hashes)
    if cfg.bank_admission == "gate":  # runs made before bank_admission existed must still resume
        fp["config"].pop("bank_admission", None)
    manifest = open_run(out, "stage3", fp, {
        "config": asdict(cfg), "base": base, "below": [str(b) for b in below], "tasks": [t.id for t in tasks],
        "latency_proxy": f"{cfg.latency_proxy} per task (deterministic; wall seconds are not rewarded)"})
    bank_path = out / "bank.sqlite"
    if cfg.bank and not bank_path.exists():
        if not Path(cfg.bank).is_file():
            raise ConfigError(f"--bank {cfg.bank}: no such file")
        shutil.copyfile(cfg.bank, bank_path)
    bank = Bank.create(bank_path, seeds=True)
    frontier_before = _frontier(cfg.bank)      # the starting bank's, also when a killed run resumes
    evaluator = PlanEvaluator(suite, get_backbone(cfg.executor), cfg, out, default_cache())
    completions_path = out / "completions.jsonl"
    logged: list[dict] = []
    if completions_path.is_file():
        logged = [json.loads(line) for line in completions_path.read_text().splitlines() if line.strip()]
    incumbents: dict[str, str] = {}

    def evaluate(prompts, completions, rows):
        return [evaluator.plan(completion_text(c), by_id[r["task_id"]], nearest[r["task_id"]])
                for c, r in zip(completions, rows)]

    def incumbent(row):
        task = by_id[row["task_id"]]
        entry = bank.incumbent(task.family)
        if entry is not None:
            files, sha = bank.files(entry.sha), entry.sha
        else:
            files = read_files(seed_bank_dir() / cfg.fallback_incumbent)
            sha = bank.add(files, generator="seed")
        incumbents[row["task_id"]] = sha
        inc = evaluator.harness(files, task)
        bank.update(sha, [_evaluation(Evaluation, task, inc, cfg.seed)])
        return inc

    def on_batch(batch):
        first = len(logged) // cfg.num_generations
        for i, record in enumerate(batch):
            row, outcome = record["row"], record["outcome"]
            task, sha = by_id[row["task_id"]], outcome["meta"].get("sha")
            record.update(task_id=task.id, sha=sha, incumbent_sha=incumbents.get(task.id), bank=None,
                          group=first + i // cfg.num_generations)
            if record["gate"] and sha:
                record["admission"] = admission(cfg.bank_admission, evaluator, bank, tasks, task, sha,
                                                incumbents[task.id])
            if record.get("admission", {}).get("admitted"):
                evaluation = _evaluation(Evaluation, task, Outcome(**outcome), cfg.seed)
                ahead = bank.advances(sha, [evaluation])
                record["advances"] = ahead
                if ahead["advances"]:               # only a candidate that enters the frontier changes the bank
                    bank.add(evaluator.files[sha], generator=evaluator.generator, parents=[incumbents[task.id]])
                    result = bank.update(sha, [evaluation])
                    record["bank"] = {k: result[k] for k in ("entered_frontier", "on_frontier", "step")}
            record.pop("row")
        logged.extend(batch)
        write_jsonl(completions_path, logged)

    rewards = ChannelRewards(evaluate, incumbent, cfg.dead_band, on_batch, cfg.num_generations)
    rows = prompt_rows(tasks, bank, cfg.k_references, cfg.format, cfg.code_references)
    nearest = {r["task_id"]: r.pop("nearest") for r in rows}        # files stay out of TRL's dataset
    rows = generation_rows(rows, cfg)

    def make_trainer(folder: Path):
        return grpo_trainer(cfg, folder, rows, rewards.functions(), base, **grpo_aggregation(cfg.weights)), 0
    try:
        manifest["phases"]["grpo"] = train_phase("grpo", out, make_trainer, rows, base, below)
    finally:
        bank_size, frontier = len(bank.evaluations()), bank.frontier()
        bank.close()
    manifest["adapter"] = link_adapter(out, out / "grpo" / "adapter")
    manifest["summary"] = {
        "candidates": len(logged), "valid": sum(r["channels"]["valid"] == 1.0 for r in logged),
        "gated_in": sum(bool(r["gate"]) for r in logged),
        "entered_frontier": sum(bool((r.get("bank") or {}).get("entered_frontier")) for r in logged),
        "advanced_frontier": sum(bool((r.get("advances") or {}).get("advances")) for r in logged),
        "evaluations_in_bank": bank_size, "frontier_size": len(frontier),
        "frontier_before": len(frontier_before), "frontier_after": len(frontier),
        "frontier_kept": len(set(frontier) & set(frontier_before)),
        "groups": signal_share([r["channels"] for r in logged], cfg.num_generations),
        "cache": {"hits": evaluator.hits, "misses": evaluator.misses}}
    write_json(out / "manifest.json", manifest)
    return manifest


def _frontier(path: str | None) -> list[str]:
    """The frontier of the bank file Stage III starts from ([] for a fresh B0: its seeds have no evaluation)."""
    if not path:
        return []
    with Bank(path, readonly=True) as bank:
        return bank.frontier()


def policy_chain(cfg, example: str) -> tuple[str, list]:
    """(base spec, adapters below) of the policy GRPO starts from: ``cfg.policy``'s chain, or the bare ``cfg.base``."""
    if not cfg.policy:
        return cfg.base, []
    if not is_adapter_dir(cfg.policy):
        raise ConfigError(f"--policy {cfg.policy}: not an adapter folder (no adapter_config.json); pass {example}")
    return adapter_chain(cfg.policy)


def grpo_batching(cfg) -> dict:
    """GRPOConfig's batch fields for ``cfg.grad_accum`` groups of ``cfg.num_generations`` per optimizer step, the loss
    computed ``cfg.micro_batch`` completions at a time (None: a whole group): TRL generates the whole batch at once
    (``steps_per_generation`` = the accumulation steps) and accumulates the gradient over its micro-batches, so the
    update is the same and the peak memory of the forward and backward scales with the micro-batch."""
    micro = cfg.micro_batch or cfg.num_generations
    return {"per_device_train_batch_size": micro,
            "gradient_accumulation_steps": cfg.grad_accum * cfg.num_generations // micro}


def grpo_trainer(cfg, folder: Path, rows: list[dict], reward_funcs: list, base: str, **grpo_args):
    """TRL's GRPOTrainer on ``rows`` (``prompt`` plus extra columns the reward functions receive), a fresh LoRA on the
    policy (``cfg.policy`` merged in, or the bare ``base``); the GRPO fields of ``cfg`` (Stage3Config or
    EngineerGRPOConfig) plus ``grpo_args`` (e.g. the reward aggregation)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    if cfg.policy:
        tokenizer, model = load_adapter(cfg.policy, load_base)
    else:
        tokenizer, model = load_base(base)
    args = common.training_arguments(cfg, folder, cfg.steps, 1.0, cfg.learning_rate)
    args.pop("max_length")
    args.update(**grpo_batching(cfg), num_generations=cfg.num_generations,
                max_completion_length=cfg.max_completion_length, temperature=cfg.temperature, beta=cfg.beta,
                num_iterations=cfg.num_iterations, epsilon=cfg.epsilon, log_completions=False, **grpo_args)
    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=GRPOConfig(**args),
                       train_dataset=Dataset.from_list(rows), processing_class=tokenizer, peft_config=lora_config(cfg))


def _evaluation(cls, task, outcome: Outcome, seed: int = 0):
    meta = outcome.meta or {}
    return cls.for_task(task, success=bool(meta.get("success")), reward=outcome.reward if outcome.valid else 0.0,
                        tokens=int(meta.get("tokens") or 0), cost=outcome.cost, latency=float(meta.get("wall_s") or 0.0),
                        tool_calls=int(meta.get("tool_calls") or 0), run_dir="train/stage3",
                        seed=seed)
