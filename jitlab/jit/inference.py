"""Just-in-time harness inference: static (N candidates, pick one) and streaming (evolving bank).

    jitlab jit --suite textworld --mode streaming --generator compose --backbone embedded --limit 20
    jitlab jit --suite toy --mode static --generator code:embedded --n-candidates 4 --selector logprob

or ``run_jit(JITConfig(...))``. Per task:

    retrieve K references from the bank -> generate N candidates (threads) -> validate each in the
    sandbox (compile, interface, smoke episode on a dev task) -> pick the first valid one in selector
    order (validity | logprob | judge; never a benchmark score) -> if none is valid, repair the top one
    (<= max_repair_rounds) -> if still none, run the nearest reference (``on_invalid="fallback"``) or
    record a harness_error (``"fail"``) -> run it on the task in the sandbox -> record ->
    (streaming) add it to the bank and apply the conservative frontier update.

Static mode reads the bank (B0) and never writes it; streaming updates it after every task, so
later tasks retrieve what worked on earlier ones (no weight update).

Accounting: every backbone call of every phase (generate, select, repair, execute) is logged in the
``calls`` table under the task's episode, and the episode's tokens/cost include all phases, so JIT
compares with fixed harnesses at matched budget; ``extra`` holds the per-phase split (docs/records.md).
Smoke episodes count as ``select`` (first validation of each candidate) or ``repair`` (revalidation).
The bank stores the *execution* tokens/cost of a harness (what reusing it costs).

Files: ``run.sqlite`` + ``summary.json`` (jitlab.store), ``bank.sqlite`` (seeded with B0 at start),
``harnesses/<sha>/`` (each harness that ran), ``candidates/`` (validation scratch), ``repairs.jsonl``.

Resume: like jitlab.runner (same config fingerprint, ConfigDrift otherwise; B0's shas are part of the
fingerprint). A task with a finished episode is skipped. The bank is updated only after the episode is
recorded, and a finished task's bank update is replayed on resume; bank adds are idempotent by sha and
evaluations by (sha, task, seed, run dir), so a SIGKILL at any point leaves no duplicate entries. The bank
stores its own run's dir as ``.`` (jitlab.jit.bank), so a run directory copied, moved or renamed resumes the
same way. The state a task sees (bank, references) depends only on the tasks before it, so a rerun task
regenerates the same candidates (and the replay cache makes that free).

Ray (static mode): ``--executor ray`` solves each unfinished task in a Ray task (jitlab/cluster.py; the Ray this
process is connected to, else ``$RAY_ADDRESS``, else a local one), ``--concurrency`` at once (default all),
against the worker's own copy of B0 in a scratch folder. The worker returns the task's episodes (calls,
steps, result), harness folders and repair records; this process alone writes run.sqlite, harnesses/,
repairs.jsonl and the bank, as each task comes back. A worker that dies fails its task only; a rerun solves
it again. The spend caps are checked against the spend recorded when each task was sent.

Repeats (``--repeat K``, jitlab/repeats.py): K independent JIT runs at seeds seed..seed+K-1, each in
``out/seed<s>/`` with a bank of its own (a repeat never retrieves what another repeat made), refused like
``jitlab run``'s when a seed varies nothing; ``out/summary.json`` holds each repeat's summary and the reliability
(pass@1 over repeats, pass^k, per-task variance) under ``repeats``. A sampling backbone (temperature > 0) samples
every call with the run's seed.

Caveats: tasks run one at a time (streaming is sequential by definition) unless ``--concurrency`` > 1 or Ray.
Every harness, seeds included, runs in the sandbox here. A Ray worker keeps its scratch folder (B0 copy) for
the life of its process.
"""
from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import BudgetExceeded, ConfigError, InfraError
from jitlab.fields import (
    CANDIDATES_MAX,
    REFERENCES_MAX,
    REPEATS_MAX,
    RETRIES_MAX,
    ROUNDS_MAX,
    SEED_MAX,
    STEPS_MAX,
    WORKERS_MAX,
    check_fields,
)
from jitlab.jit.generate.base import generator_backbone
from jitlab.jit.record import read_jit_record
from jitlab.progress import Progress
from jitlab.repeats import samples
from jitlab.runtime import (
    EPISODE_MAX_TOKENS,
    EPISODE_MAX_WALL_S,
    Budget,
    EpisodeResult,
    LLMHandle,
    RunSpend,
    SpendCapReached,
)
from jitlab.store import FINAL, RunStore, load, summarize

__all__ = ["MODES", "PHASES", "JITConfig", "cost_estimate", "run_jit", "summarize_jit"]

MODES = ("static", "streaming")
PHASES = ("generate", "select", "repair", "execute")
# how fast a run goes or when it stops, not what it computes (a run stopped by its spend cap resumes with more)
_NOT_FINGERPRINTED = ("out", "new_run", "retries", "quiet", "concurrency", "max_cost", "max_tokens_total", "executor")


@dataclass
class JITConfig:
    suite: str = field(default="textworld", metadata={"help": "suite name (jitlab suites)"})
    mode: str = field(default="streaming", metadata={"help": "static (N candidates, pick one) or streaming "
                                                             "(retrieve, generate, run, update the bank)", "choices": MODES})
    generator: str = field(default="compose", metadata={"help": "compose | code:<backbone> | plan:<backbone>"})
    backbone: str = field(default="embedded", metadata={"help": "backbone that runs the harness (and scores "
                                                                "compose's options)"})
    backbone_options: dict = field(default_factory=dict, metadata={"help": "extra backend options of the backbones"})
    judge_backbone: str | None = field(default=None, metadata={"help": "backbone of the judge selector "
                                                                       "(default: --backbone)"})
    split: str = field(default="dev", metadata={"help": "dev or test"})
    family: str | None = field(default=None, metadata={"help": "only tasks of this family"})
    limit: int | None = field(default=None, metadata={"help": "first N tasks of the split (the stream)", "min": 1})
    seed: int = field(default=0, metadata={"help": "episode seed (env reset, cache key, generator randomness)",
                                           "min": 0, "max": SEED_MAX})
    repeat: int = field(default=1, metadata={"help": "K independent runs at seeds seed..seed+K-1 in out/seed<s>/, each "
                                                     "with its own bank (jitlab/repeats.py)", "min": 1, "metavar": "K",
                                             **REPEATS_MAX})
    n_candidates: int | None = field(default=None, metadata={"help": "candidates per task (default 4 static, "
                                                                     "1 streaming)", "min": 1, **CANDIDATES_MAX})
    selector: str = field(default="validity", metadata={"help": "validity | logprob | judge (never benchmark scores)",
                                                       "choices": ("validity", "logprob", "judge")})
    k_references: int = field(default=3, metadata={"help": "references retrieved from the bank per task", "min": 1,
                                                   **REFERENCES_MAX})
    compose_strategy: str = field(default="auto", metadata={"help": "compose strategy (jitlab.jit.generate.compose)"})
    max_repair_rounds: int = field(default=2, metadata={"help": "repair rounds at most", "min": 0, **ROUNDS_MAX})
    smoke_steps: int = field(default=3, metadata={"help": "steps of each validation smoke episode (dev task)", "min": 1,
                                                  **STEPS_MAX})
    avoid_retries: int = field(default=3, metadata={"help": "streaming: regenerations of a candidate identical to a "
                                                            "harness that failed on this family (0: off)", "min": 0,
                                                    **RETRIES_MAX})
    avoid_after: int = field(default=2, metadata={"help": "streaming: tasks a harness must have failed (reward 0 on "
                                                          "each) before the novelty rule avoids it", "min": 1})
    on_invalid: str = field(default="fallback", metadata={"help": "no valid candidate after repair: 'fallback' runs "
                                                                  "the nearest reference, 'fail' records a harness_error",
                                                        "choices": ("fallback", "fail")})
    max_steps: int | None = field(default=None, metadata={"help": "step cap of the task episode; default: the task's",
                                                          "min": 1, **STEPS_MAX})
    max_tokens: int = field(default=EPISODE_MAX_TOKENS, metadata={"help": "execution tokens per episode", "min": 1})
    gen_max_tokens: int = field(default=40_000, metadata={"help": "tokens per generation/repair call set", "min": 1})
    max_wall_s: float = field(default=EPISODE_MAX_WALL_S, metadata={"help": "wall seconds per episode", "min_exclusive": 0})
    retrieval: str = field(default="auto", metadata={"help": "bank retrieval: auto | embedding | bm25",
                                                       "choices": ("auto", "embedding", "bm25")})
    bank_rule: str = field(default="dominance", metadata={"help": "when a newcomer removes a frontier member: "
                                                                   "dominance | paired (also an exact McNemar win; "
                                                                   "jitlab/selection.py)",
                                                           "choices": ("dominance", "paired")})
    bank_cost_metric: str = field(default="tokens", metadata={"help": "frontier cost axis: tokens | cost",
                                                               "choices": ("tokens", "cost")})
    allow_unisolated: bool = field(default=False, metadata={"help": "DANGEROUS: run harnesses without bubblewrap when it is "
                                                                    "unavailable (recorded loudly)"})
    cache: bool = field(default=True, metadata={"help": "use the replay cache"})
    out: str | None = field(default=None, metadata={"help": "run directory (default runs/jit-<suite>-<mode>-<generator>)",
                                                    "nonempty": True})
    retries: int = field(default=2, metadata={"help": "retries of an infrastructure failure within one invocation",
                                              "min": 0, **RETRIES_MAX})
    concurrency: int = field(default=1, metadata={"help": "static mode: tasks solved at once (a stream is solved "
                                                          "in order, so streaming needs 1)", "min": 1, **WORKERS_MAX})
    executor: str = field(default="local", metadata={"help": "static mode: 'local' (threads of this process) or 'ray' "
                                                            "(one Ray task per task, --concurrency at once; this process "
                                                            "alone writes the records; RAY_ADDRESS picks the cluster)",
                                                    "choices": ("local", "ray")})
    new_run: bool = field(default=False, metadata={"help": "start over even if the config changed (old records kept)"})
    quiet: bool = field(default=False, metadata={"help": "print nothing per task"})
    max_cost: float | None = field(default=None, metadata={"help": "run-level cap in USD on real backbone spend, all "
                                                                   "phases (cache hits are free); rerun with more to "
                                                                   "resume", "min": 0, "metavar": "USD"})
    max_tokens_total: int | None = field(default=None, metadata={"metavar": "N",
                                                                 "help": "run-level cap on backbone tokens, all phases",
                                                                 "min": 0})

    def __post_init__(self):
        check_fields(self)

    def candidates(self) -> int:
        return self.n_candidates or (4 if self.mode == "static" else 1)

    def fingerprinted(self) -> dict:
        fp = {k: v for k, v in asdict(self).items() if k not in _NOT_FINGERPRINTED}
        for name, default in (("repeat", 1), ("bank_rule", "dominance")):  # run directories made before these
            if fp[name] == default:                                           # fields existed must still resume
                del fp[name]
        return fp

    def check(self) -> None:
        from jitlab.jit.generate.select import SELECTORS
        check_fields(self)
        from jitlab.llm.base import check_name
        if self.mode not in MODES:
            raise ConfigError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.selector not in SELECTORS:
            raise ConfigError(f"--selector must be one of {', '.join(SELECTORS)}, got {self.selector!r}")
        if self.on_invalid not in ("fallback", "fail"):
            raise ConfigError(f"on_invalid must be 'fallback' or 'fail', got {self.on_invalid!r}")
        check_name(self.backbone)
        if generator_backbone(self.generator):
            check_name(generator_backbone(self.generator))
        elif self.generator != "compose":
            raise ConfigError(f"--generator must be 'compose', 'code:<backbone>' or 'plan:<backbone>', got {self.generator!r}")
        else:  # before the run directory and the bank (whose embedding model loads first) are written
            from jitlab.jit.generate.compose import STRATEGIES
            if self.compose_strategy not in STRATEGIES:
                raise ConfigError(f"--compose-strategy must be one of {', '.join(STRATEGIES)}, got "
                                  f"{self.compose_strategy!r}")
        if self.judge_backbone:
            check_name(self.judge_backbone)
        if self.concurrency < 1 or (self.mode == "streaming" and self.concurrency > 1):
            raise ConfigError(f"--concurrency {self.concurrency}: streaming solves its tasks in order (use 1); "
                              "static mode may solve several at once")
        from jitlab.cluster import check_executor
        check_executor(self.executor)
        if self.mode == "streaming" and self.executor != "local":
            raise ConfigError(f"--executor {self.executor}: streaming solves its tasks in order against a bank each "
                              "task updates, so it runs locally; use --mode static for Ray")


def cost_estimate(cfg: JITConfig, tasks: int, smoke_max_tokens: int) -> str:
    """One line bounding what ``tasks`` new tasks of ``cfg`` may cost ('' when a backbone has no known price).
    An upper bound from the token budget of every call set of a task: generation (N candidates, and in
    streaming their regenerations), the judge, N smoke validations, each repair round (repair + revalidation)
    and the execution episode, all at the dearest price of the backbones used (a set's last call may overrun
    its budget by one reply)."""
    from jitlab.llm.pricing import known_price
    names = {cfg.backbone, cfg.judge_backbone or cfg.backbone,
             generator_backbone(cfg.generator) or cfg.backbone}
    prices = [known_price(name, cfg.backbone_options) for name in names]
    if not tasks or any(p is None for p in prices):
        return ""
    per_mtok = max(max(p.input_per_mtok, p.output_per_mtok) for p in prices)
    n = cfg.candidates()
    regenerations = n * cfg.avoid_retries if cfg.mode == "streaming" else 0
    per_task = ((n + regenerations) * cfg.gen_max_tokens + (smoke_max_tokens + cfg.gen_max_tokens)
                + n * smoke_max_tokens + cfg.max_repair_rounds * 2 * (smoke_max_tokens + cfg.gen_max_tokens)
                + cfg.max_tokens)
    usd = tasks * per_task * per_mtok / 1e6
    return (f"estimated cost: at most ${usd:.4f} (upper bound: {tasks} task(s) x {per_task} tokens of call-set budgets "
            f"at ${per_mtok:g}/Mtok)")


def default_out(cfg: JITConfig) -> Path:
    slug = "-".join(str(x).replace("/", "_").replace(":", "_") for x in ("jit", cfg.suite, cfg.mode, cfg.generator, cfg.backbone))
    return Path("runs") / slug


class _Totals:
    """Sums a set of LLMHandles: what RunStore.finish_episode reads (all phases)."""

    def __init__(self, handles):
        self.prompt_tokens = sum(h.prompt_tokens for h in handles)
        self.completion_tokens = sum(h.completion_tokens for h in handles)
        self.cost = sum(h.cost for h in handles)
        self.calls = sum(h.calls for h in handles)


class _Meter:
    """Hands out one LLMHandle per call set, tagged with its phase; buffers their call records until the
    task's episode row exists (``attach``), then writes straight to the store."""

    def __init__(self, backbones: dict, cache, seed: int, gen_max_tokens: int, smoke_max_tokens: int,
                 spend: RunSpend | None = None, sample_seed: bool = False):
        self.backbones, self.cache, self.seed, self.spend = backbones, cache, seed, spend
        self.sample_seed = sample_seed  # a sampling backbone: every call samples with the run's seed
        self.gen_max_tokens, self.smoke_max_tokens = gen_max_tokens, smoke_max_tokens
        self.handles: list[LLMHandle] = []
        self._buffer: list[dict] = []
        self._sink = None
        self._lock = threading.Lock()

    def handle(self, phase: str, backbone: str = "exec", budget: Budget | None = None) -> LLMHandle:
        if budget is None:
            budget = Budget(max_tokens=self.gen_max_tokens if phase in ("generate",) else
                            self.smoke_max_tokens + self.gen_max_tokens)
        h = LLMHandle(self.backbones[backbone], budget, self.cache, on_call=self._record, seed=self.seed, phase=phase,
                      spend=self.spend, sample_seed=self.sample_seed)
        with self._lock:
            self.handles.append(h)
        return h

    def _record(self, call: dict) -> None:
        with self._lock:
            if self._sink is None:
                self._buffer.append(call)
                return
        self._sink(call)

    def attach(self, sink) -> None:
        with self._lock:
            buffered, self._buffer, self._sink = self._buffer, [], sink
        for call in buffered:
            sink(call)

    def phase(self, phase: str) -> dict:
        hs = [h for h in self.handles if h.phase == phase]
        return {"tokens": sum(h.tokens for h in hs), "cost": sum(h.cost for h in hs), "calls": sum(h.calls for h in hs)}

    def totals(self) -> _Totals:
        return _Totals(self.handles)

    def spend_stopped(self) -> bool:
        """Whether the run's spend cap refused a call of this task (any phase)."""
        return any(h.spend_stopped for h in self.handles)


@dataclass(kw_only=True)
class _Chosen:
    """The harness a task runs with: the chosen (or fallback, or last broken) candidate and how it was reached."""
    files: dict
    sha: str
    name: str
    generator: str
    parents: list
    prompt_hash: str | None
    fallback: bool
    repair_rounds: int
    n_candidates: int
    valid_candidates: int
    diagnostic: dict | None
    info: dict


class _JIT:
    def __init__(self, cfg: JITConfig, spend: RunSpend | None = None, store=None):
        """``store``: a Ray worker's _RecordingStore instead of the run's RunStore (the driver writes the records)."""
        from jitlab.harness import harness_sha, read_files, seed_bank_dir, seed_names
        from jitlab.jit.bank import Bank, BankConfig
        from jitlab.jit.repair import RepairConfig, RepairLog
        from jitlab.llm.cache import default_cache
        from jitlab.llm.lazy import LazyBackbone
        cfg.check()
        self.cfg = cfg
        self.suite = get_suite(cfg.suite)
        self.tasks = self.suite.tasks(cfg.split, cfg.family)[: cfg.limit]
        if not self.tasks:
            raise ConfigError(f"no tasks in suite {cfg.suite} split {cfg.split} family {cfg.family}")
        self.out = Path(cfg.out) if cfg.out else default_out(cfg)
        b0 = sorted(harness_sha(read_files(seed_bank_dir() / n)) for n in seed_names())
        config = {**cfg.fingerprinted(), "harness": f"jit-{cfg.mode}:{cfg.generator}", "b0": b0}
        exec_bb = LazyBackbone(cfg.backbone, cfg.backbone_options)  # name errors before the run's lock is taken
        self.backbones = {"exec": exec_bb}
        gen_name = generator_backbone(cfg.generator) or cfg.backbone
        self.backbones["gen"] = exec_bb if gen_name == cfg.backbone else LazyBackbone(gen_name, cfg.backbone_options)
        judge = cfg.judge_backbone or cfg.backbone
        self.backbones["judge"] = exec_bb if judge == cfg.backbone else LazyBackbone(judge, cfg.backbone_options)
        self.store = store or RunStore(self.out, config, new_run=cfg.new_run)
        try:  # a failure here must not keep the run's lock held in this process (a notebook would stay locked)
            if cfg.new_run or getattr(self.store, "restarted", None):  # a new run starts from B0 with an empty
                # repair log (also when the store set aside an unstarted run of another config); the old stay beside
                from jitlab.store import set_aside
                set_aside(self.out / "bank.sqlite")
                set_aside(self.out / "repairs.jsonl")
            self.bank = Bank.create(self.out / "bank.sqlite", seeds=True, exclusive=True,
                                    config=BankConfig(retrieval=cfg.retrieval, cost_metric=cfg.bank_cost_metric,
                                                      frontier_rule=cfg.bank_rule))
            self.bank.adopt_run_dirs()   # a run moved since an older jitlab recorded its bank's absolute run dir
        except BaseException:
            self.store.close()
            raise
        self.run_key = str(self.out.resolve())
        self.cache = default_cache() if cfg.cache else None
        self.repair_cfg = RepairConfig(max_rounds=cfg.max_repair_rounds, smoke_steps=cfg.smoke_steps,
                                       allow_unisolated=cfg.allow_unisolated, seed=cfg.seed)
        self.repair_log = RepairLog(self.out / "repairs.jsonl")
        self.budget = Budget(cfg.max_steps, cfg.max_tokens, cfg.max_wall_s)
        self.spend = spend or RunSpend(cfg.max_cost, cfg.max_tokens_total, *self.store.spend())

    # -- records ------------------------------------------------------------------------------------
    def _finished(self, task) -> dict | None:
        return self.store.final_episode(task.id, self.cfg.seed)

    def _patch_extra(self, episode_id: int, patch: dict) -> None:
        self.store.update_extra(episode_id, patch)

    # -- the bank -----------------------------------------------------------------------------------
    def _bank_update(self, task, rec: dict) -> None:
        """Add the harness that ran and record its evaluation (idempotent; safe to replay)."""
        from jitlab.jit.bank import Evaluation
        extra = read_jit_record(rec["extra"])
        if not extra.harness_dir:
            return
        folder = self.out / extra.harness_dir
        sha = self.bank.add(folder, generator=extra.harness_generator or self.cfg.generator,
                            parents=extra.parents or [], prompt_hash=extra.prompt_hash)
        ev = Evaluation.for_task(task, success=bool(rec["success"]), reward=float(rec["reward"] or 0.0),
                                 tokens=int(extra.exec_tokens or 0), cost=float(extra.exec_cost or 0.0),
                                 latency=float(rec["wall_s"] or 0.0), tool_calls=int(rec["tool_calls"] or 0),
                                 run_dir=self.run_key, seed=self.cfg.seed)
        update = self.bank.update(sha, [ev])
        if extra.frontier is None:
            self._patch_extra(rec["id"], {"bank_size_after": len(self.bank), "frontier": self.bank.frontier(),
                                          "bank_update": {k: update[k] for k in ("entered_frontier", "on_frontier",
                                                                                 "removed", "dominated_by")}})

    def _avoid_known_failures(self, task, cands: list, make, n: int) -> list[dict]:
        """Streaming novelty rule: a candidate identical to a harness the bank saw fail on this task family
        (reward 0 on every one of at least ``avoid_after`` tasks) is replaced by the generator's next strategy (index + n, + 2n,
        ...; at most ``avoid_retries`` times). Without it a deterministic generator repeats its failure on
        every similar task. Returns what was replaced, for the record."""
        bad = {e.sha for e in self.bank.entries() if (e.n_tasks or 0) >= self.cfg.avoid_after
               and task.family in (e.families or []) and not (e.mean_reward or 0) and not (e.success_rate or 0)}
        avoided = []
        for pos, cand in enumerate(cands):
            tries = 0
            while cand.sha in bad and tries < self.cfg.avoid_retries:
                tries += 1
                new = make(cand.index + n * tries)
                if isinstance(new, Exception):
                    break
                avoided.append({"sha": cand.sha, "name": cand.name, "replaced_by": new.sha,
                                "strategy": new.meta.get("strategy")})
                cand = cands[pos] = new
        return avoided

    def _references(self, task) -> list:
        from jitlab.jit.generate import references
        return references(self.bank, task.description, self.cfg.k_references)

    # -- one task -----------------------------------------------------------------------------------
    def _choose(self, task, refs, meter: _Meter, stream_index: int) -> _Chosen:
        from jitlab.jit.generate import get_generator, rank
        from jitlab.jit.generate.library import modules_of
        from jitlab.jit.repair import (
            dev_task_for,
            unwritten,
            validate_and_repair,
            validate_files,
        )
        cfg, public = self.cfg, task.public()
        gen_kwargs = {"strategy": cfg.compose_strategy, "seed": cfg.seed} if cfg.generator == "compose" else {}
        generator = get_generator(cfg.generator, None, **gen_kwargs)
        gen_backbone = "exec" if cfg.generator == "compose" else "gen"
        n = cfg.candidates()

        def make(i):
            try:
                return generator.generate(public, refs, meter.handle("generate", gen_backbone), index=i)
            except BudgetExceeded as exc:
                return exc
        with ThreadPoolExecutor(max(1, min(n, 4))) as pool:
            made = list(pool.map(make, range(n)))
        cands = [c for c in made if not isinstance(c, Exception)]
        gen_errors = [str(c) for c in made if isinstance(c, Exception)]
        avoided = self._avoid_known_failures(task, cands, make, n) if cfg.mode == "streaming" else []
        dev = dev_task_for(self.suite, task)
        workdir = self.out / "candidates"
        order, sel_info = rank(cands, cfg.selector, public, meter.handle("select", "judge"), generator, refs) \
            if cands else ([], {"selector": cfg.selector})
        with ThreadPoolExecutor(max(1, min(len(cands), 4))) as pool:
            checks = list(pool.map(lambda c: unwritten(c) or validate_files(
                c.files, dev, self.suite, meter.handle("select", "exec", Budget(max_tokens=self.repair_cfg.smoke_max_tokens)),
                self.repair_cfg, workdir), cands))
        valid = [i for i in range(len(cands)) if checks[i].ok]
        info = {"selector": sel_info, "candidates": [
            {"sha": c.sha, "name": c.name, "strategy": c.meta.get("strategy"), "note": c.meta.get("note", ""),
             "parsed_files": c.meta.get("parsed_files"), "fallback_files": c.meta.get("fallback_files"),
             "logprob": c.logprob, "modules": modules_of(c.files), "valid": checks[i].ok, "stage": checks[i].stage,
             "diagnostic": checks[i].diagnostic} for i, c in enumerate(cands)], "generation_errors": gen_errors,
                "avoided": avoided}
        pick = next((i for i in order if checks[i].ok), None)
        rounds, diagnostic, fallback = 0, None, False
        chosen = cands[pick] if pick is not None else None
        if chosen is None and cands:
            top = order[0]
            context = {"run_dir": self.run_key, "stream_index": stream_index, "mode": cfg.mode}
            outcome = validate_and_repair(cands[top], generator, public, dev, self.suite,
                                          lambda phase: meter.handle(phase, gen_backbone if phase == "repair" else "exec"),
                                          self.repair_cfg, workdir, self.repair_log, first=checks[top], context=context)
            rounds = outcome.rounds
            info["repair"] = [{"round": t["round"], "outcome": t["outcome"], "diagnostic": t["diagnostic"],
                               "new_diagnostic": t["new_diagnostic"]} for t in outcome.transitions]
            if outcome.ok:
                chosen = outcome.candidate
            else:
                diagnostic = outcome.validation.diagnostic
                broken = outcome.candidate
        counts = {"repair_rounds": rounds, "n_candidates": n, "valid_candidates": len(valid), "info": info}
        if chosen is not None:
            return _Chosen(files=chosen.files, sha=chosen.sha, name=chosen.name, generator=chosen.generator,
                           parents=chosen.parents, prompt_hash=chosen.prompt_hash, fallback=False, diagnostic=None,
                           **counts)
        if cfg.on_invalid == "fallback" and refs:
            ref = refs[0]
            fallback = True
            info["fallback_reason"] = diagnostic or {"message": "no candidate was generated"}
            return _Chosen(files=dict(ref.files), sha=ref.sha, name=ref.name, generator="bank", parents=[],
                           prompt_hash=None, fallback=fallback, diagnostic=diagnostic, **counts)
        if not cands:
            raise InfraError(f"no candidate generated for {task.id}: {'; '.join(gen_errors)}")
        return _Chosen(files=broken.files, sha=broken.sha, name=broken.name, generator=broken.generator,
                       parents=broken.parents, prompt_hash=broken.prompt_hash, fallback=False,
                       diagnostic=diagnostic or {"kind": "runtime_error", "message": "invalid"}, **counts)

    def solve(self, task, stream_index: int) -> None:
        from jitlab.jit.generate.library import modules_of
        from jitlab.jit.repair import write_harness
        from jitlab.runner import drive_episode
        from jitlab.sandbox import SandboxedAgent
        cfg = self.cfg
        for _ in range(cfg.retries + 1):
            done = self._finished(task)
            if done is not None:
                if cfg.mode == "streaming":
                    self._bank_update(task, done)
                return
            if self.spend.reached():  # no new task once the run's cap is reached
                self.spend.stopped = self.spend.stopped or self.spend.reached()
                return
            bank_before = len(self.bank)
            meter = _Meter(self.backbones, self.cache, cfg.seed, cfg.gen_max_tokens, self.repair_cfg.smoke_max_tokens,
                           self.spend, sample_seed=samples(cfg.backbone_options))
            refs = self._references(task)
            started = time.perf_counter()
            try:
                chosen = self._choose(task, refs, meter, stream_index)
            except InfraError as exc:
                if not meter.spend_stopped():
                    self._record_infra(task, meter, str(exc), stream_index)
                    time.sleep(0.2)
                    continue
            if meter.spend_stopped():  # the cap cut generation/validation short: what was chosen is not the result
                self._record_infra(task, meter, self.spend.stopped, stream_index, status="spend_cap")
                return
            choose_s = time.perf_counter() - started
            harness_dir = write_harness(chosen.files, self.out / "harnesses" / chosen.sha)
            _, attempt = self.store.status_of(chosen.sha, task.id, cfg.seed)
            sb_cfg = self.repair_cfg.sandbox()
            from jitlab.sandbox import require_isolation
            try:
                isolation = require_isolation(sb_cfg)
            except InfraError as exc:
                self._record_infra(task, meter, str(exc), stream_index)
                continue
            episode = self.store.start_episode(chosen.name, chosen.sha, task, cfg.seed, attempt, isolation)
            meter.attach(lambda call, ep=episode: self.store.log_call(ep, call))
            exec_llm = meter.handle("execute", "exec", self.budget)
            if chosen.diagnostic is not None and not chosen.fallback:
                result = EpisodeResult(status="harness_error", error="no valid harness after repair",
                                       diagnostic=chosen.diagnostic)
            else:
                agents = []

                def make_agent(env, folder=harness_dir, llm=exec_llm, sandbox=sb_cfg, made=agents):
                    made.append(SandboxedAgent(folder, llm, sandbox))
                    return made[-1]
                result = drive_episode(self.suite, task, make_agent, exec_llm, self.budget, cfg.seed,
                                       on_step=lambda s, ep=episode: self.store.log_step(ep, s))
                if result.status == "harness_error" and agents and agents[-1].diagnostic is not None:
                    result.diagnostic = agents[-1].diagnostic.as_dict()  # the child's own account (line, phase)
            phases = {p: meter.phase(p) for p in PHASES}
            extra = {"mode": cfg.mode, "stream_index": stream_index, "generator": cfg.generator,
                     "harness_generator": chosen.generator,
                     "gen_tokens": phases["generate"]["tokens"], "select_tokens": phases["select"]["tokens"],
                     "repair_tokens": phases["repair"]["tokens"], "exec_tokens": phases["execute"]["tokens"],
                     "gen_cost": phases["generate"]["cost"], "select_cost": phases["select"]["cost"],
                     "repair_cost": phases["repair"]["cost"], "exec_cost": phases["execute"]["cost"],
                     "repair_rounds": chosen.repair_rounds, "n_candidates": chosen.n_candidates,
                     "valid_candidates": chosen.valid_candidates, "fallback": chosen.fallback,
                     "harness_dir": f"harnesses/{chosen.sha}", "harness_name": chosen.name,
                     "modules": modules_of(chosen.files),
                     "parents": chosen.parents, "prompt_hash": chosen.prompt_hash,
                     "references": [r.sha for r in refs], "nearest_reference": refs[0].sha if refs else None,
                     "reference_names": [r.name for r in refs],
                     "bank_size_before": bank_before, "choose_s": round(choose_s, 3), "jit": chosen.info}
            if cfg.mode == "static":
                extra.update(bank_size_after=len(self.bank), frontier=self.bank.frontier())
            self.store.finish_episode(episode, {**result.as_dict(), "extra": extra}, meter.totals())
            if not cfg.quiet:
                tot = meter.totals()
                self.bar.write(f"  [{stream_index:>3}] {task.id:<30} {result.status:<13} success={int(result.success)} "
                               f"reward={result.reward:.2f} steps={result.steps:<3} harness={chosen.name[:28]:<28} "
                               f"valid={chosen.valid_candidates}/{chosen.n_candidates} repair={chosen.repair_rounds}"
                               f"{' FALLBACK' if chosen.fallback else ''} tokens(gen/sel/rep/exec)="
                               f"{phases['generate']['tokens']}/{phases['select']['tokens']}/{phases['repair']['tokens']}/"
                               f"{phases['execute']['tokens']} total={tot.prompt_tokens + tot.completion_tokens} "
                               f"{time.perf_counter() - started:6.1f}s")
            if result.status in FINAL:
                tot = meter.totals()
                self.bar.update(success=result.success, tokens=tot.prompt_tokens + tot.completion_tokens, cost=tot.cost)
            if result.status == "spend_cap":
                return
            if result.status in FINAL:
                if cfg.mode == "streaming":
                    self._bank_update(task, self._finished(task))
                return
            time.sleep(min(2.0, 0.1 * 2 ** attempt))

    def _record_infra(self, task, meter: _Meter, error: str, stream_index: int, status: str = "infra_error") -> None:
        """An infrastructure failure (or the spend cap, ``status='spend_cap'``) before a harness was chosen: a row
        that is not final (retried later) holding the calls made so far."""
        sha = f"jit-infra:{task.id}"
        _, attempt = self.store.status_of(sha, task.id, self.cfg.seed)
        episode = self.store.start_episode("jit", sha, task, self.cfg.seed, attempt, "n/a")
        meter.attach(lambda call: self.store.log_call(episode, call))
        extra = {"mode": self.cfg.mode, "stream_index": stream_index, "generator": self.cfg.generator}
        self.store.finish_episode(episode, {**EpisodeResult(status=status, error=error).as_dict(),
                                            "extra": extra}, meter.totals())
        if not self.cfg.quiet:
            print(f"  [{stream_index:>3}] {task.id:<30} {status}: {error[:200]}", flush=True)

    # -- Ray: workers solve, this process writes ------------------------------------------------------
    def _run_on_ray(self) -> None:
        """Static mode on Ray: one task per unfinished task (``concurrency`` at once, default all); each worker
        solves it against its own copy of B0 and returns its records, which are written here as they arrive."""
        from jitlab.cluster import ray_map
        todo = [i for i, t in enumerate(self.tasks) if self._finished(t) is None]
        fields, spent = asdict(self.cfg), self.store.spend()
        results = ray_map(_solve_on_worker, [(fields, self.run_key, i, spent) for i in todo],
                          self.cfg.concurrency if self.cfg.concurrency > 1 else None,
                          labels=[f"JIT task {self.tasks[i].id}" for i in todo],
                          on_result=lambda _, r: self._write_worker_result(r))
        for r in results:  # the first failed task's error, once every other task is written
            if isinstance(r, BaseException):
                raise r

    def _write_worker_result(self, r: dict) -> None:
        """A worker's records of one task, in the order a local run writes them: harness folders, repair
        transitions, then each episode (its row, calls, steps and result). A driver killed halfway leaves a
        ``running`` row, which a rerun turns ``interrupted`` and solves again, like any run."""
        from types import SimpleNamespace

        from jitlab.jit.repair import write_harness
        task = self.tasks[r["index"]]
        for sha, files in r["harnesses"].items():
            write_harness(files, self.out / "harnesses" / sha)
        for record in r["repairs"]:
            self.repair_log.append(record)
        for ep in r["episodes"]:
            _, attempt = self.store.status_of(ep["sha"], task.id, self.cfg.seed)
            episode = self.store.start_episode(ep["harness"], ep["sha"], task, self.cfg.seed, attempt, ep["isolation"])
            for call in ep["calls"]:
                self.store.log_call(episode, call)
            for step in ep["steps"]:
                self.store.log_step(episode, step)
            if ep["result"] is not None:
                self.store.finish_episode(episode, ep["result"], SimpleNamespace(**ep["totals"]))
                if not self.cfg.quiet:
                    res = ep["result"]
                    print(f"  [{r['index']:>3}] {task.id:<30} {res['status']:<13} success={int(res['success'])} "
                          f"reward={res['reward']:.2f} harness={ep['harness'][:28]:<28} (ray worker {r['pid']})",
                          flush=True)
        if r["spend_stopped"]:
            self.spend.stopped = self.spend.stopped or r["spend_stopped"]

    def run(self) -> Path:
        if not self.cfg.quiet:
            estimate = cost_estimate(self.cfg, sum(self._finished(t) is None for t in self.tasks),
                                     self.repair_cfg.smoke_max_tokens)
            if estimate:
                print(f"  {estimate}", flush=True)
        todo = sum(self._finished(t) is None for t in self.tasks)
        self.bar = Progress(todo, f"jit {self.cfg.mode} · {self.cfg.suite}", quiet=self.cfg.quiet, unit="task",
                            run_dir=self.out)
        try:
            if self.cfg.executor == "ray":
                self._run_on_ray()
            elif self.cfg.concurrency > 1:   # static only: its tasks do not share a bank update
                with ThreadPoolExecutor(self.cfg.concurrency) as pool:
                    list(pool.map(self.solve, self.tasks, range(len(self.tasks))))
            else:
                for i, task in enumerate(self.tasks):
                    self.solve(task, i)
            finished = sum(self._finished(t) is not None for t in self.tasks)
        finally:
            self.bar.close()
            self.store.close()
            self.bank.close()
        summarize_jit(self.out)
        if self.spend.stopped:
            raise SpendCapReached(f"{self.out}: {self.spend.stopped}; {finished} of {len(self.tasks)} tasks finished, "
                                  "the rest not started or stopped (recorded as spend_cap). Nothing is lost: rerun "
                                  "with a higher --max-cost / --max-tokens-total to resume.")
        return self.out


class _RecordingStore:
    """What a Ray worker's _JIT writes instead of run.sqlite: the episodes of one task in memory (row, calls,
    steps, result), returned to the driver, which writes them (jitlab.store.RunStore's interface, in memory)."""

    def __init__(self):
        self.episodes: list[dict] = []
        self._lock = threading.Lock()

    def status_of(self, harness_sha: str, task_id: str, seed: int) -> tuple[str | None, int]:
        mine = [e for e in self.episodes if e["sha"] == harness_sha and e["task_id"] == task_id]
        return ((mine[-1]["result"] or {}).get("status", "running"), len(mine)) if mine else (None, 0)

    def start_episode(self, harness: str, harness_sha: str, task, seed: int, attempt: int, isolation: str) -> int:
        with self._lock:
            self.episodes.append({"harness": harness, "sha": harness_sha, "task_id": task.id, "isolation": isolation,
                                  "calls": [], "steps": [], "result": None, "totals": None})
            return len(self.episodes) - 1

    def log_step(self, episode_id: int, record: dict) -> None:
        self.episodes[episode_id]["steps"].append(dict(record))

    def log_call(self, episode_id: int, call: dict) -> None:
        self.episodes[episode_id]["calls"].append(dict(call))

    def finish_episode(self, episode_id: int, result: dict, llm) -> None:
        self.episodes[episode_id]["result"] = json.loads(json.dumps(result, default=str))
        self.episodes[episode_id]["totals"] = {k: getattr(llm, k) for k in ("prompt_tokens", "completion_tokens",
                                                                           "cost", "calls")}

    def final_episode(self, task_id: str, seed: int) -> dict | None:
        done = [(i, e) for i, e in enumerate(self.episodes) if e["task_id"] == task_id and e["result"]
                and e["result"]["status"] in FINAL]
        if not done:
            return None
        i, e = done[-1]
        return {"id": i, "harness_sha": e["sha"], **{k: e["result"].get(k) for k in
                                                     ("status", "success", "reward", "steps", "wall_s", "tool_calls")},
                "extra": e["result"].get("extra", {})}

    def update_extra(self, episode_id: int, patch: dict) -> None:
        self.episodes[episode_id]["result"]["extra"].update(patch)

    def spend(self) -> tuple[float, int]:
        return 0.0, 0

    def close(self) -> None:
        pass


_WORKERS: dict[str, tuple] = {}   # per Ray worker process: (its _JIT, scratch folder) per run, built once


def _solve_on_worker(fields: dict, run_key: str, index: int, spent: tuple) -> dict:
    """Solve task ``index`` of a static run in a Ray worker (jitlab/cluster.py) and return its records for the
    driver: episodes, harness folders, repair transitions. Nothing is written in the run directory. The worker
    keeps its _JIT (backbones, B0 bank copy in a scratch folder) for the run's next tasks."""
    import shutil
    import tempfile
    key = json.dumps([fields, run_key], sort_keys=True, default=str)
    if key not in _WORKERS:
        scratch = Path(tempfile.mkdtemp(prefix="jitlab-jit-worker-"))
        cfg = JITConfig(**{**fields, "out": str(scratch), "new_run": False, "quiet": True, "executor": "local",
                           "concurrency": 1})
        jit = _JIT(cfg, store=_RecordingStore())
        jit.run_key = run_key   # bank evaluations and repair records name the real run directory
        jit.bar = Progress(0, quiet=True)   # solve() reports to the bar run() makes; here the driver's bar counts
        _WORKERS[key] = (jit, scratch)
    jit, scratch = _WORKERS[key]
    for name in ("harnesses", "candidates"):
        shutil.rmtree(scratch / name, ignore_errors=True)
    jit.repair_log.path.unlink(missing_ok=True)
    jit.repair_log._ids = set()
    jit.store = _RecordingStore()
    jit.spend = RunSpend(jit.cfg.max_cost, jit.cfg.max_tokens_total, *spent)
    jit.solve(jit.tasks[index], index)
    harnesses = {d.name: {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*"))
                     if p.is_file() and "__pycache__" not in p.parts}
                 for d in sorted((scratch / "harnesses").glob("*")) if d.is_dir()}
    return {"index": index, "episodes": jit.store.episodes, "harnesses": harnesses, "repairs": jit.repair_log.read(),
            "spend_stopped": jit.spend.stopped, "pid": os.getpid()}


def run_jit(cfg: JITConfig, spend: RunSpend | None = None) -> Path:
    """Run (or resume) a JIT run; returns the run directory (run.sqlite, summary.json, bank.sqlite, ...).
    ``spend``: a RunSpend shared with other runs (a grid's total cap) instead of the run's own caps; when a
    cap is reached no new task starts, a task in flight stops as ``spend_cap`` and SpendCapReached is raised."""
    if cfg.repeat > 1:
        return _run_repeats(cfg, spend)
    return _JIT(cfg, spend).run()


def _run_repeats(cfg: JITConfig, spend: RunSpend | None) -> Path:
    """``cfg.repeat`` independent runs at consecutive seeds (own run directory and bank each) and their
    reliability in ``out/summary.json`` (see the module docstring)."""
    import dataclasses

    import pandas as pd

    from jitlab.repeats import check_repeat, repeat_seeds, repeat_summary
    cfg.check()
    varies = check_repeat(get_suite(cfg.suite), cfg.backbone_options, cfg.repeat)
    out = Path(cfg.out) if cfg.out else default_out(cfg)
    dirs = []
    for seed in repeat_seeds(cfg.seed, cfg.repeat):
        one = dataclasses.replace(cfg, seed=seed, repeat=1, out=str(out / f"seed{seed}"))
        dirs.append(_JIT(one, spend).run())
    frames = [load(d)["episodes"].assign(id=lambda e, i=i: e["id"] + i * 10 ** 9) for i, d in enumerate(dirs)]
    done = pd.concat(frames, ignore_index=True)
    done = done[done["final"]]
    per_repeat = [json.loads((d / "summary.json").read_text()) for d in dirs]
    summary = {k: per_repeat[0].get(k) for k in ("suite", "split", "backbone", "harness", "mode", "generator")}
    summary.update({"n_episodes": int(len(done)), "success_rate": float(done["success"].mean()) if len(done) else 0.0,
                    "mean_reward": float(done["reward"].mean()) if len(done) else 0.0,
                    "n_tasks_unfinished": sum(s["n_tasks_unfinished"] for s in per_repeat),
                    "runs": [str(d) for d in dirs], "varies": varies, "per_repeat": per_repeat})
    repeats = repeat_summary(done.assign(extra=json.dumps({"varies": varies})))
    if repeats is not None:
        summary["repeats"] = repeats
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, out / "summary.json")
    return out


def summarize_jit(run_dir: str | Path) -> dict:
    """``jitlab.store.summarize`` plus the JIT figures (per phase tokens, repairs, validity, bank size);
    written to summary.json."""
    run_dir = Path(run_dir)
    summary = summarize(run_dir)
    eps = load(run_dir)["episodes"]
    done = eps[eps["final"]].sort_values("id")
    rows = []
    for _, ep in done.iterrows():
        x = read_jit_record(ep["extra"])
        rows.append({"task_id": ep["task_id"], "stream_index": x.stream_index, "status": ep["status"],
                     "success": bool(ep["success"]), "reward": float(ep["reward"] or 0.0),
                     "tokens": int(ep["tokens"]), "gen_tokens": x.gen_tokens or 0,
                     "select_tokens": x.select_tokens or 0, "repair_tokens": x.repair_tokens or 0,
                     "exec_tokens": x.exec_tokens or 0, "repair_rounds": x.repair_rounds or 0,
                     "n_candidates": x.n_candidates or 0, "valid_candidates": x.valid_candidates or 0,
                     "repaired": x.repaired, "fallback": bool(x.fallback), "harness": ep["harness"],
                     "harness_sha": ep["harness_sha"],
                     "parsed_files": [len(c.get("parsed_files") or []) for c in x.candidates
                                      if c.get("parsed_files") is not None],
                     "bank_size_before": x.bank_size_before, "bank_size_after": x.bank_size_after})
    rows.sort(key=lambda r: (r["stream_index"] is None, r["stream_index"]))
    n = len(rows)

    def mean(key):
        return float(sum(r[key] for r in rows) / n) if n else 0.0
    cands = sum(r["n_candidates"] for r in rows)
    parsed = [p for r in rows for p in r["parsed_files"]]
    needing = [r for r in rows if r["valid_candidates"] == 0]
    config = load(run_dir)["config"].iloc[0].to_dict() if n else {}
    summary.update({
        "mode": config.get("mode"), "generator": config.get("generator"),
        "gen_tokens_per_task": mean("gen_tokens"), "select_tokens_per_task": mean("select_tokens"),
        "repair_tokens_per_task": mean("repair_tokens"), "exec_tokens_per_task": mean("exec_tokens"),
        "repair_rounds_used": int(sum(r["repair_rounds"] for r in rows)),
        "repair_rounds_per_task": mean("repair_rounds"),
        "candidates": cands, "valid_candidates": int(sum(r["valid_candidates"] for r in rows)),
        "first_try_valid_rate": float(sum(r["valid_candidates"] for r in rows) / cands) if cands else 0.0,
        "tasks_needing_repair": len(needing),
        "repair_success_rate": (float(sum(r["repaired"] for r in needing) / len(needing)) if needing else None),
        "fallback_rate": float(sum(r["fallback"] for r in rows) / n) if n else 0.0,
        "parse_rate": (float(sum(p == 6 for p in parsed) / len(parsed)) if parsed else None),
        "parsed_files_mean": (float(sum(parsed) / len(parsed)) if parsed else None),
        "bank_size_before": rows[0]["bank_size_before"] if rows else None,
        "bank_size_after": rows[-1]["bank_size_after"] if rows else None,
        "distinct_harnesses": len({r["harness_sha"] for r in rows}),
        "per_task": rows,
    })
    tmp = run_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, run_dir / "summary.json")
    return summary
