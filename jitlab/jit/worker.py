"""The JIT run on Ray (static mode): each unfinished task is solved in a Ray task (jitlab/cluster.py) against the
worker's own copy of B0, which returns the task's records (episodes with their calls and steps, harness folders,
repair transitions); the driver alone writes them, in the order a local run does (see jitlab.jit.inference)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

from jitlab.cluster import ray_map
from jitlab.jit.config import JITConfig
from jitlab.jit.loop import JITEngine
from jitlab.jit.repair import write_harness
from jitlab.progress import Progress
from jitlab.runtime import RunSpend
from jitlab.store import FINAL, Status

__all__ = ["run_on_ray"]


def run_on_ray(jit: JITEngine) -> None:
    """Static mode on Ray: one task per unfinished task (``concurrency`` at once, default all); each worker
    solves it against its own copy of B0 and returns its records, which are written here as they arrive."""
    todo = [i for i, t in enumerate(jit.tasks) if jit._finished(t) is None]
    # the spend recorded so far, and when this invocation's wall clock started (time.time: other processes read it)
    fields, spent = asdict(jit.cfg), (*jit.store.spend(), time.time() - jit.spend.elapsed())
    results = ray_map(_solve_on_worker, [(fields, jit.run_key, i, spent) for i in todo],
                      jit.cfg.concurrency if jit.cfg.concurrency > 1 else None,
                      labels=[f"JIT task {jit.tasks[i].id}" for i in todo],
                      on_result=lambda _, r: _write_worker_result(jit, r))
    for r in results:  # the first failed task's error, once every other task is written
        if isinstance(r, BaseException):
            raise r

def _write_worker_result(jit: JITEngine, r: dict) -> None:
    """A worker's records of one task, in the order a local run writes them: harness folders, repair
    transitions, then each episode (its row, calls, steps and result). A driver killed halfway leaves a
    ``running`` row, which a rerun turns ``interrupted`` and solves again, like any run."""
    task = jit.tasks[r["index"]]
    for sha, files in r["harnesses"].items():
        write_harness(files, jit.out / "harnesses" / sha)
    for record in r["repairs"]:
        jit.repair_log.append(record)
    for ep in r["episodes"]:
        _, attempt = jit.store.status_of(ep["sha"], task.id, jit.cfg.seed)
        episode = jit.store.start_episode(ep["harness"], ep["sha"], task, jit.cfg.seed, attempt, ep["isolation"])
        for call in ep["calls"]:
            jit.store.log_call(episode, call)
        for step in ep["steps"]:
            jit.store.log_step(episode, step)
        if ep["result"] is not None:
            jit.store.finish_episode(episode, ep["result"], SimpleNamespace(**ep["totals"]))
            if not jit.cfg.quiet:
                res = ep["result"]
                print(f"  [{r['index']:>3}] {task.id:<30} {res['status']:<13} success={int(res['success'])} "
                      f"reward={res['reward']:.2f} harness={ep['harness'][:28]:<28} (ray worker {r['pid']})",
                      flush=True)
    if r["spend_stopped"]:
        jit.spend.stopped = jit.spend.stopped or r["spend_stopped"]


class _RecordingStore:
    """What a Ray worker's JITEngine writes instead of run.sqlite: the episodes of one task in memory (row, calls,
    steps, result), returned to the driver, which writes them (jitlab.store.RunStore's interface, in memory)."""

    def __init__(self):
        self.episodes: list[dict] = []
        self._lock = threading.Lock()

    def status_of(self, harness_sha: str, task_id: str, seed: int) -> tuple[str | None, int]:
        mine = [e for e in self.episodes if e["sha"] == harness_sha and e["task_id"] == task_id]
        return ((mine[-1]["result"] or {}).get("status", Status.RUNNING), len(mine)) if mine else (None, 0)

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


_WORKERS: dict[str, tuple] = {}   # per Ray worker process: (its JITEngine, scratch folder) per run, built once


def _solve_on_worker(fields: dict, run_key: str, index: int, spent: tuple) -> dict:
    """Solve task ``index`` of a static run in a Ray worker (jitlab/cluster.py) and return its records for the
    driver: episodes, harness folders, repair transitions. Nothing is written in the run directory. The worker
    keeps its JITEngine (backbones, B0 bank copy in a scratch folder) for the run's next tasks."""
    key = json.dumps([fields, run_key], sort_keys=True, default=str)
    if key not in _WORKERS:
        scratch = Path(tempfile.mkdtemp(prefix="jitlab-jit-worker-"))
        cfg = JITConfig(**{**fields, "out": str(scratch), "new_run": False, "quiet": True, "executor": "local",
                           "concurrency": 1})
        jit = JITEngine(cfg, store=_RecordingStore())
        jit.run_key = run_key   # bank evaluations and repair records name the real run directory
        jit.bar = Progress(0, quiet=True)   # solve() reports to the bar run() makes; here the driver's bar counts
        _WORKERS[key] = (jit, scratch)
    jit, scratch = _WORKERS[key]
    for name in ("harnesses", "candidates"):
        shutil.rmtree(scratch / name, ignore_errors=True)
    jit.repair_log.path.unlink(missing_ok=True)
    jit.repair_log._ids = set()
    jit.store = _RecordingStore()
    cost, tokens, started = spent
    jit.spend = RunSpend(**jit.cfg.caps(), cost=cost, tokens=tokens, clock=time.time, started=started)
    jit.solve(jit.tasks[index], index)
    harnesses = {d.name: {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*"))
                     if p.is_file() and "__pycache__" not in p.parts}
                 for d in sorted((scratch / "harnesses").glob("*")) if d.is_dir()}
    return {"index": index, "episodes": jit.store.episodes, "harnesses": harnesses, "repairs": jit.repair_log.read(),
            "spend_stopped": jit.spend.stopped, "pid": os.getpid()}
