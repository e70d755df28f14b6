"""Stage I data from an offline teacher: recorded evaluations -> (TaskSpec + references) -> plan examples, and
Pareto preference pairs.

    from jitlab.train.data import build_stage1
    manifest = build_stage1(Stage1DataConfig(runs=["runs/seed-grid/textworld-react", ...], banks=["runs/jit/bank.sqlite"]),
                            "runs/train/data1")
    jitlab train data stage1 --runs runs/seed-grid/* --bank runs/jit-tw/bank.sqlite --out runs/train/data1

Evidence: every finished episode of the given run directories (``jitlab.store.load``: the seed grid, compose or
JIT runs; a JIT run's candidates are read from its own bank.sqlite) and every evaluation in the given banks (compose
search samples, JIT candidates); an evaluation found in both a run and a bank (same harness, task and metrics) counts
once. Teachers are whatever produced that evidence on dev tasks: the seed grid (``jitlab run --split dev``), compose
search (``jitlab jit --generator compose --split dev``) and, with a key or server, a strong model writing plans
(``jitlab jit --generator plan:litellm:<model> --split dev``); pass runs of one executor backbone, since rewards of
different executors are not comparable. Each harness is read back into a plan (:func:`jitlab.jit.generate.plan.plan_of`);
harnesses a plan cannot express (a role written as a file of its own) are dropped and counted. Evidence for the
same plan on the same task is averaged (reward, cost in USD, tokens); tokens are the deterministic latency proxy
(wall time is noise on a shared machine).

Validity: a plan is valid when its rendered files pass the sandbox's load and interface check
(``repair.validate_files`` with no smoke run) and none of its recorded episodes ended in ``harness_error``.
Only valid plans are SFT targets: per task, the best ones (reward up, then cost down, then tokens down).

Pairs (chosen, rejected) for one task, chosen valid: chosen *dominates* rejected (reward >=, cost <=, tokens <=,
one strictly), or ties on reward and is cheaper (rule ``tie_cheaper``), or rejected is invalid
(``valid_over_invalid``). At most ``max_pairs_per_task``, largest reward gap first, then largest cost ratio.

Prompts are exactly what ``plan:<backbone>`` sends at inference: ``plan_messages(task.public(), references)`` with
the K references a B0 bank retrieves for the task. With ``format: code`` the prompt is ``code:<backbone>``'s (the
first ``code_references`` references with their code) and the completion is the plan's harness files as
``<file name=...>`` blocks: resolved (the library code written out, as the code generator shows references; 4.5-5k
tokens) or thin (``code_form: thin``: library subclasses, ~800 tokens, which is what fits beside a 3.9k-token
prompt in the 135M model's 8k context). Tasks come from the dev (or train) split only; evidence on a test
task is dropped and counted, never trained on.

Files written to ``out``: ``sft.jsonl``, ``pairs.jsonl``, ``candidates.jsonl`` (every plan x task with its
metrics and validity, for notebooks), ``validation.json`` (cache: rerunning skips validated plans) and
``manifest.json`` (config, sources, counts, drops, file hashes, package versions).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import ConfigError, HarnessError
from jitlab.harness import harness_sha, read_files, resolve
from jitlab.jit.bank import Bank
from jitlab.jit.generate import references
from jitlab.jit.generate.base import resolved
from jitlab.jit.generate.blocks import format_blocks
from jitlab.jit.generate.plan import plan_files, plan_of, plan_text
from jitlab.jit.repair import RepairConfig, validate_files
from jitlab.store import Status, load
from jitlab.train.common import policy_generator, sole_folder
from jitlab.train.config import Stage1DataConfig
from jitlab.train.records import file_sha256, versions, write_json, write_jsonl

__all__ = ["Evidence", "PlanStats", "build_stage1", "collect_evidence", "pareto_pairs", "prefers", "task_index"]


@dataclass
class Evidence:
    """One recorded evaluation of a harness on a task."""
    files: dict = field(repr=False)
    sha: str
    task_id: str
    suite: str
    family: str
    reward: float
    cost: float
    tokens: float
    harness_error: bool
    source: str


@dataclass
class PlanStats:
    """A plan's mean metrics on one task over its evidence."""
    plan: str                       # canonical plan text (plan_text)
    task_id: str
    suite: str
    family: str
    reward: float
    cost: float
    tokens: float
    n: int
    harness_errors: int
    sources: list
    valid: bool = False
    diagnostic: dict | None = None

    def key(self) -> tuple:
        """Sort key of 'best first': reward up, cost down, tokens down, then plan text (deterministic)."""
        return -round(self.reward, 9), round(self.cost, 12), round(self.tokens, 6), self.plan


def _frames_evidence(run_dir: Path) -> tuple[list[Evidence], dict]:
    frames = load(run_dir)
    config = frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}
    suite = str(config.get("suite") or "")
    drops = {"sha_mismatch": 0}
    files_by_sha: dict[str, dict] = {}
    bank_path = run_dir / "bank.sqlite"
    bank = None
    if bank_path.is_file():  # a JIT run: its candidates are in its own bank
        bank = Bank(bank_path, readonly=True)
    harness = str(config.get("harness") or "")
    if harness and not harness.startswith("jit-") and harness != "oracle":
        try:
            files = read_files(resolve(harness))
            files_by_sha[harness_sha(files)] = files
        except (HarnessError, ConfigError, OSError):
            pass
    eps = frames["episodes"]
    eps = eps[eps["final"]]
    out = []
    try:
        for row in eps.to_dict("records"):
            sha = str(row["harness_sha"])
            if sha not in files_by_sha and bank is not None and sha in bank:
                files_by_sha[sha] = bank.files(sha)
            if sha not in files_by_sha:
                drops["sha_mismatch"] += 1   # the harness changed since the run (or is not recorded anywhere)
                continue
            out.append(Evidence(files_by_sha[sha], sha, str(row["task_id"]), suite, str(row.get("family") or ""),
                                float(row.get("reward") or 0.0), float(row.get("cost") or 0.0),
                                float(row.get("tokens") or 0.0), row["status"] == Status.HARNESS_ERROR, f"run:{run_dir}"))
    finally:
        if bank is not None:
            bank.close()
    return out, drops


def _bank_evidence(path: Path) -> list[Evidence]:
    if not path.is_file():
        raise ConfigError(f"--bank {path}: no such file")
    bank = Bank(path, readonly=True)
    try:
        out = []
        files: dict[str, dict] = {}
        for ev in bank.evaluations():
            sha = ev["sha"]
            if sha not in files:
                files[sha] = bank.files(sha)
            out.append(Evidence(files[sha], sha, str(ev["task_id"]), str(ev["suite"] or ""), str(ev["family"] or ""),
                                float(ev["reward"] or 0.0), float(ev["cost"] or 0.0), float(ev["tokens"] or 0.0),
                                False, f"bank:{path}"))
        return out
    finally:
        bank.close()


def collect_evidence(cfg: Stage1DataConfig) -> tuple[list[Evidence], dict]:
    """Every recorded evaluation in ``cfg.runs`` and ``cfg.banks``, and counts of what was dropped."""
    evidence, drops = [], {"sha_mismatch": 0}
    for run in cfg.runs:
        rows, d = _frames_evidence(Path(run))
        evidence += rows
        drops["sha_mismatch"] += d["sha_mismatch"]
    for bank in cfg.banks:
        evidence += _bank_evidence(Path(bank))
    # a JIT run's episodes are also in its bank: passing both must not count them twice
    unique, seen = [], set()
    for e in evidence:
        key = (e.sha, e.task_id, round(e.reward, 9), round(e.cost, 12), round(e.tokens, 3))
        if key in seen and not e.harness_error:
            drops["duplicate"] = drops.get("duplicate", 0) + 1
            continue
        seen.add(key)
        unique.append(e)
    return unique, drops


def prefers(a: PlanStats, b: PlanStats) -> str | None:
    """Why ``a`` is preferred to ``b`` on the same task ('dominates', 'tie_cheaper', 'valid_over_invalid'), or None.
    ``a`` must be valid."""
    if not a.valid:
        return None
    if not b.valid:
        return "valid_over_invalid"
    r = (round(a.reward, 9), round(b.reward, 9))
    c = (round(a.cost, 12), round(b.cost, 12))
    t = (round(a.tokens, 6), round(b.tokens, 6))
    if r[0] >= r[1] and c[0] <= c[1] and t[0] <= t[1] and (r[0] > r[1] or c[0] < c[1] or t[0] < t[1]):
        return "dominates"
    if r[0] == r[1] and c[0] < c[1]:
        return "tie_cheaper"
    return None


def pareto_pairs(stats: list[PlanStats], limit: int) -> list[tuple[PlanStats, PlanStats, str]]:
    """Preference pairs among one task's plans (see module docstring), at most ``limit``."""
    pairs = []
    for a in stats:
        for b in stats:
            if a is not b and (rule := prefers(a, b)):
                pairs.append((a, b, rule))

    def rank(p):
        a, b, _ = p
        ratio = (b.cost + 1e-12) / (a.cost + 1e-12)
        return -(a.reward - b.reward), -math.log(ratio), a.plan, b.plan
    return sorted(pairs, key=rank)[:limit]


def task_index(suites: set[str]) -> dict[str, tuple]:
    """task id -> (split, TaskSpec) for every split of the given suites."""
    out = {}
    for name in sorted(suites):
        suite = get_suite(name)
        for split in suite.splits:
            for task in suite.tasks(split):
                out.setdefault(task.id, (split, task))
    return out


def _validate(plans: dict[str, dict], tasks: dict[str, tuple], cfg: Stage1DataConfig, out: Path) -> dict[str, dict]:
    """{plan text: {"ok": bool, "diagnostic": ...}}, cached in out/validation.json."""
    cache_path = out / "validation.json"
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    config = RepairConfig(max_rounds=0, smoke_steps=0, allow_unisolated=cfg.allow_unisolated)
    for text, (suite_name, task_id) in plans.items():
        if text in cache:
            continue
        files = plan_files(json.loads(text), "teacher")
        suite = get_suite(suite_name)
        v = validate_files(files, tasks[task_id][1], suite, None, config, out / "validate")
        cache[text] = {"ok": v.ok, "diagnostic": v.diagnostic, "isolation": v.isolation}
        write_json(cache_path, cache)
    return cache


def _message(content: str) -> list[dict]:
    return [{"role": "assistant", "content": content}]


@sole_folder("Stage I data")
def build_stage1(cfg: Stage1DataConfig, out: str | Path) -> dict:
    """Write Stage I's SFT examples and preference pairs to ``out`` (see the module docstring); returns the manifest."""
    if not cfg.runs and not cfg.banks:
        raise ConfigError("no evidence: pass --runs <run dir>... and/or --bank <bank.sqlite>")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    evidence, drops = collect_evidence(cfg)
    drops.update(not_a_plan=0, test_split=0, other_split=0, unknown_task=0)
    tasks = task_index({e.suite for e in evidence if e.suite})
    # (task, plan) -> evidence rows
    groups: dict[tuple[str, str], list[Evidence]] = {}
    plan_cache: dict[str, str | None] = {}
    for e in evidence:
        if e.task_id not in tasks:
            drops["unknown_task"] += 1
            continue
        split = tasks[e.task_id][0]
        if split not in cfg.splits:
            drops["test_split" if split == "test" else "other_split"] += 1
            continue
        if e.sha not in plan_cache:
            plan = plan_of(e.files)
            plan_cache[e.sha] = plan_text(plan) if plan is not None else None
        if plan_cache[e.sha] is None:
            drops["not_a_plan"] += 1
            continue
        groups.setdefault((e.task_id, plan_cache[e.sha]), []).append(e)
    stats: dict[str, list[PlanStats]] = {}
    for (task_id, text), rows in sorted(groups.items()):
        n = len(rows)
        task = tasks[task_id][1]
        stats.setdefault(task_id, []).append(PlanStats(
            text, task_id, task.suite, task.family, sum(r.reward for r in rows) / n, sum(r.cost for r in rows) / n,
            sum(r.tokens for r in rows) / n, n, sum(r.harness_error for r in rows), sorted({r.source for r in rows})))
    first_task = {}
    for task_id, items in stats.items():
        for s in items:
            first_task.setdefault(s.plan, (s.suite, task_id))
    checks = _validate(first_task, tasks, cfg, out)
    for items in stats.values():
        for s in items:
            s.valid = bool(checks[s.plan]["ok"]) and s.harness_errors == 0
            s.diagnostic = checks[s.plan]["diagnostic"]

    refs_bank = Bank.create(out / "references.sqlite", seeds=True)
    generator = policy_generator(cfg.format, code_references=cfg.code_references)
    target = _target(cfg)
    sft, pairs, candidates = [], [], []
    drops["pair_not_rendered"] = 0
    try:
        for task_id in sorted(stats):
            task = tasks[task_id][1]
            prompt = generator.messages(task.public(), references(refs_bank, task.description, cfg.k_references))
            base = {"task_id": task_id, "suite": task.suite, "family": task.family, "split": tasks[task_id][0],
                    "format": cfg.format}
            ranked = sorted(stats[task_id], key=PlanStats.key)
            candidates += [{**base, **{k: v for k, v in asdict(s).items() if k not in ("task_id", "suite", "family")}}
                           for s in ranked]
            for s in [s for s in ranked if s.valid][:cfg.examples_per_task]:
                sft.append({**base, "prompt": prompt, "completion": _message(target(s.plan)), "plan": s.plan,
                            "reward": s.reward, "cost": s.cost, "tokens": s.tokens, "n_evals": s.n,
                            "teacher": "recorded-best", "sources": s.sources})
            for a, b, rule in pareto_pairs(ranked, cfg.max_pairs_per_task):
                try:
                    chosen, rejected = target(a.plan), target(b.plan)
                except HarnessError:        # code format: a rejected plan the module checker refuses has no files
                    drops["pair_not_rendered"] += 1
                    continue
                pairs.append({**base, "prompt": prompt, "chosen": _message(chosen), "rejected": _message(rejected),
                              "rule": rule, "chosen_metrics": _metrics(a), "rejected_metrics": _metrics(b)})
    finally:
        refs_bank.close()
    counts = {"evidence": len(evidence), "tasks": len(stats), "plans": len(first_task),
              "valid_plans": sum(1 for c in checks.values() if c["ok"]), "sft": write_jsonl(out / "sft.jsonl", sft),
              "pairs": write_jsonl(out / "pairs.jsonl", pairs),
              "candidates": write_jsonl(out / "candidates.jsonl", candidates),
              "pair_rules": {r: sum(p["rule"] == r for p in pairs) for r in ("dominates", "tie_cheaper",
                                                                              "valid_over_invalid")}}
    manifest = {"kind": "stage1-data", "config": asdict(cfg), "counts": counts, "dropped": drops,
                "hashes": {name: file_sha256(out / name) for name in ("sft.jsonl", "pairs.jsonl", "candidates.jsonl")},
                "versions": versions()}
    write_json(out / "manifest.json", manifest)
    return manifest


def _target(cfg: Stage1DataConfig):
    """plan text -> the completion the student learns: the plan itself, or (code format) its harness files as
    ``<file name=...>`` blocks, resolved or thin (``cfg.code_form``)."""
    if cfg.format == "plan":
        return lambda text: text
    if cfg.code_form == "thin":
        return lambda text: format_blocks(plan_files(json.loads(text), "teacher"))
    return lambda text: format_blocks(resolved(plan_files(json.loads(text), "teacher")))


def _metrics(s: PlanStats) -> dict:
    return {"reward": s.reward, "cost": s.cost, "tokens": s.tokens, "n": s.n, "valid": s.valid}
