"""Run a harness on a slice of a suite and record everything (resumable).

    jitlab run --suite textworld --harness react --limit 5 --out runs/demo      # backbone: llm.base.DEFAULT_BACKBONE

or from Python: ``run(RunConfig(suite="textworld", harness="react", limit=5))``. Rerunning the
same command resumes (finished episodes are skipped, infrastructure failures retried); a changed
config is refused unless ``new_run=True``. Episodes run ``concurrency`` at a time in threads, so
a local backbone (openvino, hf) can batch their calls.

Harness ``oracle`` uses the suite's privileged oracle (a sanity check, never a baseline).
Trusted seed harnesses run in-process; any other harness folder runs in the sandbox
(``isolation="auto"``); ``isolation="sandbox"`` forces the sandbox for seeds too.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from jitlab import memory
from jitlab.envs.base import checked_tasks, get_suite, make_env
from jitlab.errors import ConfigError, InfraError
from jitlab.fields import REPEATS_MAX, check_fields
from jitlab.harness import Harness, harness_sha, load_harness, read_files, resolve, seed_bank_dir
from jitlab.llm.base import DEFAULT_BACKBONE
from jitlab.llm.cache import default_cache
from jitlab.llm.lazy import LazyBackbone
from jitlab.llm.pricing import known_price
from jitlab.progress import Progress
from jitlab.repeats import check_repeat, repeat_seeds, samples
from jitlab.run_options import NOT_FINGERPRINTED, EpisodeOptions, NewRun, Quiet, RunControls
from jitlab.runtime import (
    Budget,
    EpisodeResult,
    HarnessAgent,
    LLMHandle,
    RunSpend,
    SpendCapReached,
    resume_hint,
    run_episode,
)
from jitlab.sandbox import SandboxConfig, SandboxedAgent
from jitlab.sandbox.runner import require_isolation
from jitlab.store import FINAL, RunStore, Status, summarize

__all__ = ["IMPLIED", "RunConfig", "backoff", "cost_estimate", "default_out", "drive_episode", "known_price", "retry",
           "run", "run_summarized", "sandboxed_episode"]

# fields that change how fast a run goes or when it stops, not what it computes: excluded from the fingerprint
# (so a run stopped by its spend cap resumes with a higher one)
_NOT_FINGERPRINTED = ("out", "new_run", *NOT_FINGERPRINTED)
# fields a fingerprint leaves out at the value runs had before the field existed (what their absence stands for)
IMPLIED = {"offset": 0, "repeat": 1}


@dataclass
class RunConfig(EpisodeOptions, RunControls, Quiet, NewRun):
    suite: str = field(default="textworld", metadata={"help": "suite name (jitlab suites), or a mixed stream: "
                                                                "mix:<a>+<b>[@shuffle seed] | mix:<spec.yaml>"})
    harness: str = field(default="react", metadata={"help": "seed name, 'oracle', or path of a harness folder"})
    backbone: str = field(default=DEFAULT_BACKBONE, metadata={"help": "openvino:embedded | embedded (hf float32) | "
                                                                      "hf:<dir>[#f.gguf] | litellm:<model> | "
                                                                      "llamacpp:embedded|<f.gguf> | scripted:<name>"})
    backbone_options: dict = field(default_factory=dict, metadata={"help": "extra backend options (api_base, "
                                                                          "max_new_tokens, ...)"})
    split: str = field(default="dev", metadata={"help": "a split of the suite: dev, test, train, holdout (jitlab suites)"})
    family: str | None = field(default=None, metadata={"help": "only tasks of this family"})
    offset: int = field(default=0, metadata={"help": "index of the first task in the split", "min": 0})
    limit: int | None = field(default=None, metadata={"help": "first N tasks of the split (from --offset)", "min": 1})
    repeat: int = field(default=1, metadata={"help": "run each task at seeds seed..seed+K-1 (varies the reset where the "
                                                     "suite's games do, sampling at temperature > 0; refused when "
                                                     "neither: jitlab/repeats.py)", "min": 1, "metavar": "K",
                                             **REPEATS_MAX})
    isolation: str = field(default="auto", metadata={"help": "auto (seeds in-process, others sandboxed) | sandbox | none",
                                                            "choices": ("auto", "sandbox", "none")})
    out: str | None = field(default=None, metadata={"help": "run directory (default runs/<suite>-<harness>-<backbone>)",
                                                    "nonempty": True})

    def __post_init__(self):
        check_fields(self)

    def fingerprinted(self) -> dict:
        fp = {k: v for k, v in asdict(self).items() if k not in _NOT_FINGERPRINTED}
        for name, value in IMPLIED.items():  # run directories made before these fields existed have no such key
            if fp[name] == value:              # and must still resume
                del fp[name]
        return fp


def default_out(cfg: RunConfig) -> Path:
    slug = "-".join(str(x).replace("/", "_").replace(":", "_") for x in (cfg.suite, Path(cfg.harness).name, cfg.backbone))
    return Path("runs") / slug


def _agent_factory(cfg: RunConfig, suite, harness: Harness | None = None):
    """(harness name, sha, isolation label, make_agent(env, llm)); ``harness``: a Harness object run in-process."""
    if harness is not None:
        if cfg.isolation == "sandbox":
            raise ConfigError("a Harness object runs in this process (there is no folder to sandbox); save it as a "
                              "harness folder to run it with isolation='sandbox'")
        return harness.name, harness.sha, "in-process (a Harness object)", lambda env, llm: HarnessAgent(harness, llm)
    if cfg.harness == "oracle":
        if not hasattr(suite, "oracle"):
            raise ConfigError(f"suite {cfg.suite} has no oracle")
        return "oracle", f"oracle:{cfg.suite}", "trusted (oracle)", lambda env, llm: suite.oracle(env)
    folder = resolve(cfg.harness)
    trusted = folder.parent in (seed_bank_dir().resolve(), (seed_bank_dir() / "case_studies").resolve())  # resolved library code
    harness = load_harness(folder) if trusted else None
    if cfg.isolation == "none" or (cfg.isolation == "auto" and trusted):
        if not trusted and not cfg.allow_unisolated:
            raise ConfigError(f"{folder} is not a seed harness: it runs in the sandbox. isolation='none' for "
                              "untrusted code also needs allow_unisolated=True (--allow-unisolated).")
        harness = harness or load_harness(folder)
        label = "in-process (trusted seed)" if trusted else "NONE: untrusted code ran unisolated (--allow-unisolated)"
        return harness.name, harness.sha, label, lambda env, llm: HarnessAgent(harness, llm)
    sb_cfg = SandboxConfig(allow_unisolated=cfg.allow_unisolated)
    label = require_isolation(sb_cfg)  # refuses here, before any episode, when bubblewrap is unusable
    return folder.name, harness_sha(read_files(folder)), label, lambda env, llm: SandboxedAgent(folder, llm, sb_cfg)


def drive_episode(suite, task, make_agent, llm: LLMHandle, budget: Budget, seed: int, on_step=None) -> EpisodeResult:
    """One episode of ``task``, as ``jitlab run`` and ``jitlab jit`` both drive it: make the environment and the
    agent (``make_agent(env)``), run the episode loop, close both. An InfraError anywhere (a game that cannot be
    generated, a ``make_env`` that raises, a sandbox that cannot start) becomes an ``infra_error`` result with its
    error, which the caller retries and never counts as a task failure, and the run goes on to the next task; the
    caller's episode row is therefore always finished."""
    env = agent = None
    try:
        start = time.perf_counter()
        env = make_env(suite, task)
        agent = make_agent(env)
        setup_s = time.perf_counter() - start
        result = run_episode(env, agent, llm, budget, seed, on_step=on_step)
        result.time["setup_s"] = round(setup_s, 4)   # the environment and agent built, outside the episode's wall
    except InfraError as exc:
        result = EpisodeResult(status=Status.INFRA_ERROR, error=str(exc))
    finally:
        if hasattr(agent, "close"):  # a sandboxed agent holds a child process
            agent.close()
        if env is not None:
            env.close()
        memory.trim()    # the episode's freed arrays go back to the system (jitlab/memory.py)
    return result


def sandboxed_episode(suite, task, folder, llm: LLMHandle, budget: Budget, seed: int, sandbox: SandboxConfig,
                      on_step=None) -> tuple[EpisodeResult, SandboxedAgent | None]:
    """One episode of the harness files in ``folder`` on ``task``, in the sandbox (:func:`drive_episode` with a
    SandboxedAgent), as the JIT, its validation and Stage III run a candidate. A ``harness_error`` carries the child's
    own diagnostic (line, phase). Returns the result and the agent (its ``isolation``, ``diagnostic``; None when the
    environment could not be made)."""
    made: list[SandboxedAgent] = []

    def make_agent(env):
        made.append(SandboxedAgent(folder, llm, sandbox))
        return made[-1]
    result = drive_episode(suite, task, make_agent, llm, budget, seed, on_step=on_step)
    agent = made[-1] if made else None
    if result.status == Status.HARNESS_ERROR and agent is not None and agent.diagnostic is not None:
        result.diagnostic = agent.diagnostic.as_dict()
    return result, agent


def backoff(attempt: int) -> float:
    """Seconds to wait before retrying an episode whose ``attempt``-th try failed on infrastructure."""
    return min(2.0, 0.1 * 2 ** attempt)


def retry(retries: int, finished, spend: RunSpend, attempt, stop: threading.Event | None = None) -> None:
    """The retry/resume loop of one episode, shared by ``run`` and the JIT loop (jitlab.jit.loop): at most
    ``retries + 1`` tries. Before each it stops when ``stop`` is set, when ``finished()`` is true (a final episode
    is recorded: a resumed run skips it) or when the run's spend cap is reached (noted in ``spend.stopped``).
    ``attempt()`` makes one try and returns the seconds to wait before the next, or None when none is due (the
    episode is final, or stopped at the spend cap)."""
    for _ in range(retries + 1):
        if stop is not None and stop.is_set():
            return
        if finished():
            return
        if spend.reached():  # no new episode once the run's cap is reached
            spend.stopped = spend.stopped or spend.reached()
            return
        pause = attempt()
        if pause is None:
            return
        if pause:
            time.sleep(pause)


def cost_estimate(cfg: RunConfig, episodes: int) -> str:
    """One line bounding what ``episodes`` new episodes of ``cfg`` may cost ('' when the backbone has no
    known price). An upper bound: every episode spends its whole ``max_tokens`` budget at the dearer of
    the input and output prices (its last call may overrun the budget by one reply)."""
    price = known_price(cfg.backbone, cfg.backbone_options)
    if price is None or not episodes:
        return ""
    per_mtok = max(price.input_per_mtok, price.output_per_mtok)
    usd = episodes * cfg.max_tokens * per_mtok / 1e6
    return (f"estimated cost: at most ${usd:.4f} (upper bound: {episodes} episode(s) x --max-tokens {cfg.max_tokens} "
            f"at ${per_mtok:g}/Mtok)")


def run(cfg: RunConfig, spend: RunSpend | None = None, backbone: LazyBackbone | None = None,
        harness: Harness | None = None) -> Path:
    """Run (or resume) ``cfg``; returns the run directory holding run.sqlite and summary.json (``run_summarized``
    also returns the summary). ``harness``: a Harness object (``Harness.from_modules``) to run in this process instead
    of ``cfg.harness``, which then records its name."""
    return run_summarized(cfg, spend, backbone, harness)[0]


def run_summarized(cfg: RunConfig, spend: RunSpend | None = None, backbone: LazyBackbone | None = None,
                   harness: Harness | None = None) -> tuple[Path, dict]:
    """Run (or resume) ``cfg``; returns the run directory holding run.sqlite and summary.json, and that summary.

    ``spend`` (optional) is a RunSpend shared with other runs (a grid's total cap); by default the run's
    own ``max_cost`` / ``max_tokens_total`` are checked against its recorded spend, and ``max_wall_total_s`` against
    the time since the run started. When a cap is reached
    no new episode starts, episodes in flight stop as ``spend_cap``, and SpendCapReached is raised after
    summary.json is written.

    ``backbone`` (optional) is a LazyBackbone of ``cfg.backbone`` with ``cfg.backbone_options`` shared by several
    runs in one process (the engineer loop's batches), so its model loads once; by default each run builds its own."""
    check_fields(cfg)  # again: a notebook may have changed a field after construction
    if harness is not None:
        cfg = replace(cfg, harness=harness.name)   # what the records, the fingerprint and the default out name
    suite = get_suite(cfg.suite)
    tasks = _slice(cfg, suite)
    varies = check_repeat(suite, cfg.backbone_options, cfg.repeat)
    episodes = [(task, seed) for seed in repeat_seeds(cfg.seed, cfg.repeat) for task in tasks]  # repeat-major
    out = Path(cfg.out) if cfg.out else default_out(cfg)
    harness_name, sha, isolation, make_agent = _agent_factory(cfg, suite, harness)
    if backbone is None:
        backbone = LazyBackbone(cfg.backbone, cfg.backbone_options)
    elif (backbone.name, backbone.options) != (cfg.backbone, cfg.backbone_options):
        raise ConfigError(f"run: the shared backbone is {backbone.id}, the config names {cfg.backbone}; pass its own")
    budget = cfg.budget()
    cache = default_cache() if cfg.cache else None
    store = RunStore(out, {**cfg.fingerprinted(), "harness_sha": sha}, new_run=cfg.new_run,  # last: it locks `out`
                     implied=IMPLIED)
    if spend is None:
        spend = cfg.run_spend(*store.spend())
    todo = sum(store.status_of(sha, t.id, seed)[0] not in FINAL for t, seed in episodes)
    bar = Progress(todo, f"{harness_name} · {cfg.suite}", quiet=cfg.quiet, run_dir=out)
    if not cfg.quiet and (estimate := cost_estimate(cfg, todo)):
        print(f"  {estimate}", flush=True)

    stop = threading.Event()  # set on Ctrl-C: no thread starts another episode

    def one(item) -> None:
        task, seed = item

        def attempt() -> float | None:
            _, attempt_no = store.status_of(sha, task.id, seed)
            episode = store.start_episode(harness_name, sha, task, seed, attempt_no, isolation)
            llm = LLMHandle(backbone, budget, cache, on_call=lambda c, e=episode: store.log_call(e, c), seed=seed,
                            spend=spend, sample_seed=samples(cfg.backbone_options))
            result = drive_episode(suite, task, lambda env, llm=llm: make_agent(env, llm), llm, budget, seed,
                                   on_step=lambda s, e=episode: store.log_step(e, s))
            record = result.as_dict()
            if cfg.repeat > 1:
                record["extra"] = {"repeat": seed - cfg.seed, "varies": varies}
            store.finish_episode(episode, record, llm)
            if not cfg.quiet:
                bar.write(_episode_line(f"{task.id}@{seed}" if cfg.repeat > 1 else task.id, result, llm.tokens))
            if result.status in FINAL:
                bar.update(success=result.success, tokens=llm.tokens, cost=llm.cost)
            if result.status in FINAL or result.status == Status.SPEND_CAP:
                return None
            return backoff(attempt_no)
        retry(cfg.retries, lambda: store.status_of(sha, task.id, seed)[0] in FINAL, spend, attempt, stop)

    try:
        _each(one, episodes, cfg.concurrency, stop)
        finished = sum(store.status_of(sha, t.id, seed)[0] in FINAL for t, seed in episodes)
    finally:
        bar.close()
        store.close()
    summary = summarize(out)
    if spend.stopped:
        raise SpendCapReached(f"{out}: {spend.stopped}; {finished} of {len(episodes)} episodes finished, the rest "
                              f"not started or stopped (recorded as spend_cap). {resume_hint(spend.stopped)}")
    return out, summary


def _slice(cfg: RunConfig, suite) -> list:
    """The tasks ``cfg`` runs (``limit`` of its split and family from ``offset``); ConfigError when there are none."""
    every = checked_tasks(suite, cfg.split, cfg.family)
    tasks = every[cfg.offset:][: cfg.limit]
    if not tasks:
        past = f" from offset {cfg.offset} (it has {len(every)}); lower --offset" if every else ""
        raise ConfigError(f"no tasks in suite {cfg.suite} split {cfg.split} family {cfg.family}{past}")
    return tasks


def _episode_line(tag: str, result: EpisodeResult, tokens: int) -> str:
    """The progress line of one finished try of an episode."""
    return (f"  {tag:<32} {result.status:<13} success={int(result.success)} reward={result.reward:.2f} "
            f"steps={result.steps:<3} tokens={tokens:<6} {result.wall_s:6.1f}s")


def _each(one, episodes: list, concurrency: int, stop: threading.Event) -> None:
    """``one(item)`` for every episode, ``concurrency`` at a time in threads; on Ctrl-C (any exception) ``stop`` is
    set and nothing more starts (episodes in flight stay ``running``, later recorded as interrupted)."""
    if concurrency <= 1:
        for item in episodes:
            one(item)
        return
    pool = ThreadPoolExecutor(concurrency)
    try:
        for future in [pool.submit(one, item) for item in episodes]:
            future.result()
    except BaseException:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
