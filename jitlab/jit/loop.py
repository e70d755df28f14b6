"""The JIT task loop: per task, retrieve references, generate and validate candidates, repair, fall back, run the
chosen harness in the sandbox, record the episode (jitlab.jit.record.JITTaskRecord) and update the bank. The run as
a whole (modes, resume, Ray, repeats) is described in jitlab.jit.inference, its front."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from jitlab.envs.base import checked_tasks, get_suite
from jitlab.errors import BudgetExceeded, ConfigError, InfraError
from jitlab.harness import harness_sha, read_files, seed_bank_dir, seed_names
from jitlab.jit.bank import Bank, BankConfig, Evaluation
from jitlab.jit.config import IMPLIED, PHASES, JITConfig, cost_estimate, default_out
from jitlab.jit.generate import evidence, get_generator, rank, references
from jitlab.jit.generate.base import generator_backbone
from jitlab.jit.generate.library import choices_of, first_fitting, modules_of
from jitlab.jit.kind import task_kind
from jitlab.jit.meter import Meter
from jitlab.jit.record import JITTaskRecord, read_jit_record
from jitlab.jit.repair import (
    RepairConfig,
    RepairLog,
    dev_task_for,
    unfit,
    unwritten,
    validate_and_repair,
    validate_files,
    write_harness,
)
from jitlab.jit.summary import summarize_jit
from jitlab.llm.cache import default_cache
from jitlab.llm.lazy import LazyBackbone
from jitlab.lockfile import check_lock_path
from jitlab.progress import Progress
from jitlab.repeats import samples
from jitlab.runner import backoff, retry, sandboxed_episode
from jitlab.runtime import Budget, EpisodeResult, RunSpend, SpendCapReached, resume_hint
from jitlab.sandbox import require_isolation
from jitlab.store import FINAL, RunStore, Status, set_aside

__all__ = ["JITEngine", "same_design"]

# record keys a task writes even when null (no reference retrieved, a harness with no library class or prompt)
_NULLABLE = ("modules", "prompt_hash", "nearest_reference")
# novelty: two files (or prompts) whose code lines, comments and blank lines aside, match this closely (difflib's
# ratio over lines) are one design: a copy with a line or a name changed
NEAR_DUPLICATE = 0.9


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in str(text).splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _near(a: str, b: str) -> bool:
    if a == b:
        return True
    la, lb = _lines(a), _lines(b)
    return la == lb or SequenceMatcher(None, la, lb, autojunk=False).ratio() >= NEAR_DUPLICATE


def same_design(a: dict, b: dict) -> bool:
    """Are two harnesses one design? ``a``, ``b``: their resolved choices (``library.choices_of``: M, P, F, A, H and
    the prompt). Library choices must be the same class with the same parameters; file choices and prompts
    near-duplicates (``NEAR_DUPLICATE``). Names and descriptions do not count."""
    for role in a.keys() | b.keys():
        x, y = a.get(role), b.get(role)
        if x is None or y is None or (x.kind == "library") != (y.kind == "library"):
            return False
        if (x.key() != y.key()) if x.kind == "library" else not _near(x.text, y.text):
            return False
    return True


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
    novelty_rejected: int = 0


class JITEngine:
    """One JIT run: its tasks, backbones, bank, store and repair log; ``solve`` does one task, ``run`` them all."""

    def __init__(self, cfg: JITConfig, spend: RunSpend | None = None, store=None):
        """``store``: a Ray worker's _RecordingStore instead of the run's RunStore (the driver writes the records)."""
        cfg.check()
        self.cfg = cfg
        self.suite = get_suite(cfg.suite)
        self.tasks = checked_tasks(self.suite, cfg.split, cfg.family)[: cfg.limit]
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
        check_lock_path(self.out / "bank.sqlite.lock")  # refused before the run directory is written, as run.lock is
        self.store = store or RunStore(self.out, config, new_run=cfg.new_run, implied=IMPLIED)
        try:  # a failure here must not keep the run's lock held in this process (a notebook would stay locked)
            if cfg.new_run or getattr(self.store, "restarted", None):  # a new run starts from B0 with an empty
                # repair log (also when the store set aside an unstarted run of another config); the old stay beside
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
        self.spend = spend or cfg.run_spend(*self.store.spend())

    # -- records ------------------------------------------------------------------------------------
    def _finished(self, task) -> dict | None:
        return self.store.final_episode(task.id, self.cfg.seed)

    def _patch_extra(self, episode_id: int, patch: dict) -> None:
        self.store.update_extra(episode_id, patch)

    # -- the bank -----------------------------------------------------------------------------------
    def _bank_update(self, task, rec: dict) -> None:
        """Add the harness that ran and record its evaluation (idempotent; safe to replay)."""
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
        bad = {e.sha for e in self._failed_on_family(task)}
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

    def _failed_on_family(self, task) -> list:
        """Bank entries that failed on the task's family among the tasks of its kind (``jitlab.jit.kind``: its tool
        signature): reward 0 on every one of at least ``avoid_after`` tasks of that kind, one of that family. A stream
        of one kind reads every evaluation; on a mixed one a family name another kind of task shares (DBBench's
        ``other``), or a design's record on other kinds, does not make a failure here."""
        return [e for e in self.bank.entries(kind=task_kind(task)) if (e.n_tasks or 0) >= self.cfg.avoid_after
                and task.family in (e.families or []) and not (e.mean_reward or 0) and not (e.success_rate or 0)]

    def _reject_repeats(self, task, cands: list, make, n: int) -> list[dict]:
        """Novelty rejection, before any candidate is validated or run: a candidate of the same design
        (:func:`same_design`) as one kept before it for this task, or as a bank harness that failed on this task
        family (:meth:`_failed_on_family`; the sha rule above misses a copy renamed or with a comment changed), is
        rejected. Streaming mode asks the generator for its next strategy instead (indices past the sha rule's, at
        most ``avoid_retries`` times); static mode drops it. When nothing novel is left, the first candidate is
        kept (``kept_repeat``). ``cands`` is rewritten in place; returns the rejections, for the record."""
        failed = [(e.sha, choices_of(self.bank.files(e.sha))) for e in self._failed_on_family(task)]
        retries = self.cfg.avoid_retries if self.cfg.mode == "streaming" else 0
        kept, rejected = [], []
        for pos, cand in enumerate(cands):   # position pos is the generator's index pos (+ n per regeneration)
            for tries in range(retries + 1):
                if tries:
                    cand = make(pos + n * (self.cfg.avoid_retries + tries))
                    if isinstance(cand, Exception):
                        break
                mine = choices_of(cand.files)
                like = next((("a candidate of this task", k.sha) for k, theirs in kept if same_design(mine, theirs)),
                            None) or next((("failed on the family", sha) for sha, theirs in failed
                                           if same_design(mine, theirs)), None)
                if like is None:
                    kept.append((cand, mine))
                    break
                rejected.append({"sha": cand.sha, "name": cand.name, "strategy": cand.meta.get("strategy"),
                                 "like": like[1], "why": like[0]})
        if not kept and cands:
            kept = [(cands[0], None)]
            rejected[0]["kept_repeat"] = True
        cands[:] = [c for c, _ in kept]
        return rejected

    def _references(self, task) -> list:
        """The task's references, retrieved and evaluated on the bank's tasks of its kind only (``jitlab.jit.kind``)."""
        return references(self.bank, task.description, self.cfg.k_references, kind=task_kind(task))

    # -- one task -----------------------------------------------------------------------------------
    def _choose(self, task, refs, meter: Meter, stream_index: int) -> _Chosen:
        cfg, public = self.cfg, task.public()
        gen_kwargs = {"strategy": cfg.compose_strategy, "seed": cfg.seed} if cfg.generator == "compose" else {}
        generator = get_generator(cfg.generator, None, **gen_kwargs)
        gen_backbone = "exec" if cfg.generator == "compose" else "gen"
        n = cfg.candidates()
        record = {"evidence": evidence(self.bank, task_kind(task))} \
            if cfg.generator == "compose" and cfg.option_evidence == "bank" else {}

        def make(i):
            try:
                return generator.generate(public, refs, meter.handle("generate", gen_backbone), index=i, **record)
            except BudgetExceeded as exc:
                return exc
        with ThreadPoolExecutor(max(1, min(n, 4))) as pool:
            made = list(pool.map(make, range(n)))
        cands = [c for c in made if not isinstance(c, Exception)]
        gen_errors = [str(c) for c in made if isinstance(c, Exception)]
        avoided = self._avoid_known_failures(task, cands, make, n) if cfg.mode == "streaming" else []
        novelty = self._reject_repeats(task, cands, make, n)
        dev = dev_task_for(self.suite, task)
        workdir = self.out / "candidates"
        order, sel_info = rank(cands, cfg.selector, public, meter.handle("select", "judge"), generator, refs) \
            if cands else ([], {"selector": cfg.selector})
        with ThreadPoolExecutor(max(1, min(len(cands), 4))) as pool:
            checks = list(pool.map(lambda c: unwritten(c) or unfit(c, public) or validate_files(
                c.files, dev, self.suite, meter.handle("select", "exec", Budget(max_tokens=self.repair_cfg.smoke_max_tokens)),
                self.repair_cfg, workdir), cands))
        valid = [i for i in range(len(cands)) if checks[i].ok]
        info = {"selector": sel_info, "candidates": [
            {"sha": c.sha, "name": c.name, "strategy": c.meta.get("strategy"), "note": c.meta.get("note", ""),
             "parsed_files": c.meta.get("parsed_files"), "fallback_files": c.meta.get("fallback_files"),
             "logprob": c.logprob, "modules": modules_of(c.files), "valid": checks[i].ok, "stage": checks[i].stage,
             "diagnostic": checks[i].diagnostic, **({"refused": c.meta["refused"]} if c.meta.get("refused") else {})}
            for i, c in enumerate(cands)], "generation_errors": gen_errors,
                "avoided": avoided, "novelty": novelty}
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
        counts = {"repair_rounds": rounds, "n_candidates": n, "valid_candidates": len(valid), "info": info,
                  "novelty_rejected": sum(not r.get("kept_repeat") for r in novelty)}
        if chosen is not None:
            return _Chosen(files=chosen.files, sha=chosen.sha, name=chosen.name, generator=chosen.generator,
                           parents=chosen.parents, prompt_hash=chosen.prompt_hash, fallback=False, diagnostic=None,
                           **counts)
        if cfg.on_invalid == "fallback" and refs:
            ref = first_fitting(refs, public)    # the nearest reference this task can use (the fit rule)
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
        """Solve ``task`` (retrying an infrastructure failure, jitlab.runner.retry); a finished one is skipped,
        its bank update replayed (streaming)."""
        def finished() -> bool:
            done = self._finished(task)
            if done is not None and self.cfg.mode == "streaming":
                self._bank_update(task, done)
            return done is not None
        retry(self.cfg.retries, finished, self.spend, lambda: self._attempt(task, stream_index))

    def _attempt(self, task, stream_index: int) -> float | None:
        """One try at ``task``: choose a harness, run it, record the episode. Returns the seconds to wait before
        a retry, or None when none is due (final, or stopped at the spend cap)."""
        cfg = self.cfg
        bank_before = len(self.bank)
        meter = Meter(self.backbones, self.cache, cfg.seed, cfg.gen_max_tokens, self.repair_cfg.smoke_max_tokens,
                      self.spend, sample_seed=samples(cfg.backbone_options))
        refs = self._references(task)
        started = time.perf_counter()
        try:
            chosen = self._choose(task, refs, meter, stream_index)
        except InfraError as exc:
            if not meter.spend_stopped():
                self._record_infra(task, meter, str(exc), stream_index)
                return 0.2
        if meter.spend_stopped():  # the cap cut generation/validation short: what was chosen is not the result
            self._record_infra(task, meter, self.spend.stopped, stream_index, status=Status.SPEND_CAP)
            return None
        choose_s = time.perf_counter() - started
        harness_dir = write_harness(chosen.files, self.out / "harnesses" / chosen.sha)
        _, attempt = self.store.status_of(chosen.sha, task.id, cfg.seed)
        sb_cfg = self.repair_cfg.sandbox()
        try:
            isolation = require_isolation(sb_cfg)
        except InfraError as exc:
            self._record_infra(task, meter, str(exc), stream_index)
            return 0.0
        episode = self.store.start_episode(chosen.name, chosen.sha, task, cfg.seed, attempt, isolation)
        meter.attach(lambda call, ep=episode: self.store.log_call(ep, call))
        exec_llm = meter.handle("execute", "exec", self.budget)
        if chosen.diagnostic is not None and not chosen.fallback:
            result = EpisodeResult(status=Status.HARNESS_ERROR, error="no valid harness after repair",
                                   diagnostic=chosen.diagnostic)
        else:
            result, _ = sandboxed_episode(self.suite, task, harness_dir, exec_llm, self.budget, cfg.seed, sb_cfg,
                                          on_step=lambda s, ep=episode: self.store.log_step(ep, s))
        rec = self._task_record(chosen, refs, meter, stream_index, bank_before, choose_s)
        self.store.finish_episode(episode, {**result.as_dict(), "extra": rec.as_dict(nulls=_NULLABLE)}, meter.totals())
        tot = meter.totals()
        if not cfg.quiet:
            self.bar.write(f"  [{stream_index:>3}] {task.id:<30} {result.status:<13} success={int(result.success)} "
                           f"reward={result.reward:.2f} steps={result.steps:<3} harness={chosen.name[:28]:<28} "
                           f"valid={chosen.valid_candidates}/{chosen.n_candidates} repair={chosen.repair_rounds}"
                           f"{' FALLBACK' if chosen.fallback else ''} tokens(gen/sel/rep/exec)="
                           f"{rec.gen_tokens}/{rec.select_tokens}/{rec.repair_tokens}/{rec.exec_tokens} "
                           f"total={tot.prompt_tokens + tot.completion_tokens} {time.perf_counter() - started:6.1f}s")
        if result.status in FINAL:
            self.bar.update(success=result.success, tokens=tot.prompt_tokens + tot.completion_tokens, cost=tot.cost)
            if cfg.mode == "streaming":
                self._bank_update(task, self._finished(task))
            return None
        return None if result.status == Status.SPEND_CAP else backoff(attempt)

    def _task_record(self, chosen: _Chosen, refs: list, meter: Meter, stream_index: int, bank_before: int,
                     choose_s: float) -> JITTaskRecord:
        """What the task's episode records in ``extra``: the harness that ran, how it was chosen, per-phase spend,
        the references and the bank around it (static mode: the bank it read, unchanged)."""
        cfg = self.cfg
        phases = {p: meter.phase(p) for p in PHASES}
        rec = JITTaskRecord(
            mode=cfg.mode, stream_index=stream_index, generator=cfg.generator, harness_generator=chosen.generator,
            gen_tokens=phases["generate"]["tokens"], select_tokens=phases["select"]["tokens"],
            repair_tokens=phases["repair"]["tokens"], exec_tokens=phases["execute"]["tokens"],
            gen_cost=phases["generate"]["cost"], select_cost=phases["select"]["cost"],
            repair_cost=phases["repair"]["cost"], exec_cost=phases["execute"]["cost"],
            repair_rounds=chosen.repair_rounds, n_candidates=chosen.n_candidates,
            valid_candidates=chosen.valid_candidates, novelty_rejected=chosen.novelty_rejected, fallback=chosen.fallback,
            harness_dir=f"harnesses/{chosen.sha}", harness_name=chosen.name, modules=modules_of(chosen.files),
            parents=chosen.parents, prompt_hash=chosen.prompt_hash, references=[r.sha for r in refs],
            nearest_reference=refs[0].sha if refs else None, reference_names=[r.name for r in refs],
            bank_size_before=bank_before, choose_s=round(choose_s, 3), jit=chosen.info)
        if cfg.mode == "static":
            rec.bank_size_after, rec.frontier = len(self.bank), self.bank.frontier()
        return rec

    def _record_infra(self, task, meter: Meter, error: str, stream_index: int, status: str = Status.INFRA_ERROR) -> None:
        """An infrastructure failure (or the spend cap, ``status='spend_cap'``) before a harness was chosen: a row
        that is not final (retried later) holding the calls made so far."""
        sha = f"jit-infra:{task.id}"
        _, attempt = self.store.status_of(sha, task.id, self.cfg.seed)
        episode = self.store.start_episode("jit", sha, task, self.cfg.seed, attempt, "n/a")
        meter.attach(lambda call: self.store.log_call(episode, call))
        extra = JITTaskRecord(mode=self.cfg.mode, stream_index=stream_index, generator=self.cfg.generator).as_dict()
        self.store.finish_episode(episode, {**EpisodeResult(status=status, error=error).as_dict(),
                                            "extra": extra}, meter.totals())
        if not self.cfg.quiet:
            print(f"  [{stream_index:>3}] {task.id:<30} {status}: {error[:200]}", flush=True)

    def run(self, remote=None) -> Path:
        """Solve every task (resuming), write summary.json and return the run directory. ``remote(self)``, when
        given, solves the unfinished tasks elsewhere instead (jitlab.jit.worker.run_on_ray, static mode)."""
        if not self.cfg.quiet:
            estimate = cost_estimate(self.cfg, sum(self._finished(t) is None for t in self.tasks),
                                     self.repair_cfg.smoke_max_tokens)
            if estimate:
                print(f"  {estimate}", flush=True)
        todo = sum(self._finished(t) is None for t in self.tasks)
        self.bar = Progress(todo, f"jit {self.cfg.mode} · {self.cfg.suite}", quiet=self.cfg.quiet, unit="task",
                            run_dir=self.out)
        try:
            if remote is not None:
                remote(self)
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
                                  "the rest not started or stopped (recorded as spend_cap). "
                                  f"{resume_hint(self.spend.stopped)}")
        return self.out
