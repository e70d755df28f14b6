"""The Ray executor: run independent units of work (grid cells, notebook runs, static JIT tasks) on a Ray cluster.

    run_grid(suites, harnesses, backbones, executor="ray", workers=4)          # jitlab.experiments
    jitlab batch NB.ipynb --grid g.yaml --out batches/x --executor ray
    jitlab jit --suite toy --mode static --executor ray --concurrency 4

Where it runs: an already connected Ray (``ray.init`` called by the notebook or the test) is used as it is;
otherwise :func:`ray_init` connects to ``$RAY_ADDRESS`` when set (``ray://head:10001`` through Ray Client, or
``auto`` / ``head:6379`` on a cluster node), else starts a local Ray with this machine's CPUs. To use an
existing cluster from Python call ``ray.init(address="ray://head:10001")`` before the grid, or
``export RAY_ADDRESS=ray://head:10001`` before ``jitlab batch`` / ``jitlab jit``.

How: each unit is one Ray task (``num_cpus=1``, no automatic retry). Ray keeps its worker processes between
tasks, and a local model is cached per process (jitlab/llm/hf/engine.py ``_ENGINES``), so each worker process loads a
backbone once, on its first task that calls it. One writer per run directory: a grid cell's task owns its
cell's directory (the run store's flock on ``run.lock``); static JIT tasks write nothing and return their
records, which the driver alone writes. A task whose worker dies (killed, out of memory, node lost) fails
that unit with an InfraError; the others finish; rerunning resumes it like any interrupted run.

Caveats: the workers import jitlab and read suites, seeds and the replay cache (``$JITLAB_HOME``) on the
node they run on, so a cluster's nodes need the same jitlab checkout and data, and grid run directories
(written by the workers) should be on storage the driver sees (a shared file system) if it is to read them.
Each task gets this process's ``PYTHONPATH`` and ``JITLAB_*`` variables (set them to paths valid on the nodes).
Ray is imported only here, when a Ray executor is used (``pip install ray``; the ``ray`` and ``dev`` extras).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from jitlab.errors import ConfigError, InfraError, JitlabError

__all__ = ["ADDRESS_ENV", "EXECUTORS", "check_executor", "ray_init", "ray_map"]

EXECUTORS = ("local", "ray")
ADDRESS_ENV = "RAY_ADDRESS"
POLL_S = 3.0   # how often ray_map calls its poll() while units run

log = logging.getLogger(__name__)


def check_executor(executor: str) -> str:
    if executor not in EXECUTORS:
        raise ConfigError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    return executor


def ray_init(address: str | None = None):
    """The ``ray`` module, connected: the running connection if there is one, else ``address`` or
    ``$RAY_ADDRESS``, else a new local Ray. ConfigError when ray is not installed."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray executor needs ray: pip install 'ray' (or the jitlab[ray] extra), "
                          "or use executor 'local'") from exc
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get(ADDRESS_ENV) or None, log_to_driver=False)
    return ray


def _worker_env() -> dict:
    """What a unit's worker process must share with this one: the import path of this jitlab and the JITLAB_*
    folders (data, replay cache, a batch's output and spend roots), read now, not when Ray started."""
    return {k: v for k, v in os.environ.items() if k == "PYTHONPATH" or k.startswith("JITLAB_")}


@dataclass
class _Failure:
    """A unit's exception, sent back as a value: Ray cannot return every exception (one whose ``__init__`` takes
    other arguments than its message does not unpickle), and the caller should see the error it would see locally."""
    module: str
    name: str
    message: str
    pickled: bytes | None
    traceback: str

    @classmethod
    def of(cls, exc: BaseException) -> _Failure:
        import pickle
        import traceback
        try:
            data = pickle.dumps(exc)
            pickle.loads(data)
        except Exception:  # any pickling failure: fall back to the class and message
            data = None
        return cls(type(exc).__module__, type(exc).__qualname__, str(exc), data, traceback.format_exc())

    def error(self) -> BaseException:
        import importlib
        import pickle
        if self.pickled is not None:
            return pickle.loads(self.pickled)
        try:
            kind = getattr(importlib.import_module(self.module), self.name)
        except (ImportError, AttributeError):
            kind = None
        if isinstance(kind, type) and issubclass(kind, Exception):
            exc = kind.__new__(kind)
            Exception.__init__(exc, self.message)   # same class and message, without its own __init__'s arguments
            return exc
        return InfraError(f"{self.module}.{self.name}: {self.message}")


def _run_unit(fn, *args):
    """In the worker: ``fn(*args)``, or the exception it raised as a _Failure (a unit's failure is its result)."""
    try:
        return fn(*args)
    except Exception as exc:  # every error of the unit goes back to the caller, which decides what it means
        return _Failure.of(exc)


def _unwrap(exc: BaseException, label: str) -> BaseException:
    """The error a unit raised, as the caller would see it locally: a task's own exception (Ray wraps it),
    or an InfraError for a worker that died."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, JitlabError):
        return cause
    from ray.exceptions import RayTaskError
    if isinstance(exc, RayTaskError):
        return cause if isinstance(cause, Exception) else exc
    return InfraError(f"{label}: its Ray worker died ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                      "rerun the same command to resume it")


def ray_map(fn, args_list: list[tuple], workers: int | None = None, labels: list[str] | None = None,
            on_result=None, before_start=None, poll=None) -> list:
    """``fn(*args)`` for each tuple of ``args_list`` as Ray tasks, at most ``workers`` at once (default: all
    at once; Ray queues them on its CPUs). Returns the results in order; a unit that failed has its exception in
    its place (logged when it fails). ``on_result(index, result)`` is called in this process as each finishes,
    in completion order (static JIT writes its records there). ``before_start(index)``, when given, is called
    just before a unit would start: a result other than None is taken as the unit's result and it does not
    run (``jitlab batch`` stops starting notebooks at its spend cap). ``poll()``, when given, is called before units
    start and every ``POLL_S`` while they run; what it raises stops the map, the units still running cancelled
    (``jitlab batch`` at its wall cap). ``fn`` must be a module-level function."""
    ray = ray_init()
    env = _worker_env()
    remote = ray.remote(num_cpus=1, max_retries=0)(_run_unit).options(runtime_env={"env_vars": env} if env else None)
    labels = labels or [f"unit {i}" for i in range(len(args_list))]
    results: list = [None] * len(args_list)
    pending, waiting = {}, list(range(len(args_list)))
    limit = workers or len(args_list)
    while waiting or pending:
        if poll is not None:
            try:
                poll()
            except BaseException:
                for ref in pending:
                    ray.cancel(ref, force=True)
                raise
        while waiting and len(pending) < limit:
            i = waiting.pop(0)
            instead = before_start(i) if before_start is not None else None
            if instead is not None:
                results[i] = instead
                continue
            pending[remote.remote(fn, *args_list[i])] = i
        if not pending:
            break
        done, _ = ray.wait(list(pending), num_returns=1, timeout=None if poll is None else POLL_S)
        for ref in done:
            i = pending.pop(ref)
            try:
                results[i] = ray.get(ref)
            except ray.exceptions.RayError as exc:
                results[i] = _unwrap(exc, labels[i])
                log.error("%s failed: %s", labels[i], results[i])
                continue
            if isinstance(results[i], _Failure):
                log.debug("%s: the worker's traceback:\n%s", labels[i], results[i].traceback)
                results[i] = results[i].error()
                log.error("%s failed: %r", labels[i], results[i])
                continue
            if on_result is not None:
                on_result(i, results[i])
    return results
