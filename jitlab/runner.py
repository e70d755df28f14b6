"""Run a harness on a slice of a suite and record everything (resumable).

    jitlab run --suite textworld --harness react --backbone embedded --limit 5 --out runs/demo

or from Python: ``run(RunConfig(suite="textworld", harness="react", limit=5))``. Rerunning the
same command resumes (finished episodes are skipped, infrastructure failures retried); a changed
config is refused unless ``new_run=True``. Episodes run ``concurrency`` at a time in threads, so
the hf backend can batch their backbone calls.

Harness ``oracle`` uses the suite's privileged oracle (a sanity check, never a baseline).
Trusted seed harnesses run in-process; any other harness folder runs in the sandbox
(``isolation="auto"``); ``isolation="sandbox"`` forces the sandbox for seeds too.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import ConfigError, InfraError
from jitlab.runtime import Budget, EpisodeResult, HarnessAgent, LLMHandle, run_episode
from jitlab.store import FINAL, RunStore, summarize

__all__ = ["LazyBackbone", "RunConfig", "default_out", "run"]

# fields that change how fast a run goes, not what it computes: excluded from the fingerprint
_NOT_FINGERPRINTED = ("out", "concurrency", "new_run", "retries", "quiet")


@dataclass
class RunConfig:
    suite: str = field(default="textworld", metadata={"help": "suite name (jitlab suites)"})
    harness: str = field(default="react", metadata={"help": "seed name, 'oracle', or path of a harness folder"})
    backbone: str = field(default="embedded", metadata={"help": "embedded | hf:<dir>[#f.gguf] | litellm:<model> | scripted:<name>"})
    backbone_options: dict = field(default_factory=dict, metadata={"help": "extra backend options (api_base, max_new_tokens, ...)"})
    split: str = field(default="dev", metadata={"help": "dev or test"})
    family: str | None = field(default=None, metadata={"help": "only tasks of this family"})
    limit: int | None = field(default=None, metadata={"help": "first N tasks of the split"})
    seed: int = field(default=0, metadata={"help": "episode seed (env reset and cache key)"})
    max_steps: int | None = field(default=None, metadata={"help": "step cap; default: each task's own"})
    max_tokens: int = field(default=60_000, metadata={"help": "backbone tokens per episode"})
    max_wall_s: float = field(default=900.0, metadata={"help": "wall seconds per episode"})
    isolation: str = field(default="auto", metadata={"help": "auto (seeds in-process, others sandboxed) | sandbox | none"})
    allow_unisolated: bool = field(default=False, metadata={"help": "run untrusted code without bubblewrap (recorded loudly)"})
    cache: bool = field(default=True, metadata={"help": "use the replay cache"})
    out: str | None = field(default=None, metadata={"help": "run directory (default runs/<suite>-<harness>-<backbone>)"})
    concurrency: int = field(default=1, metadata={"help": "episodes run at once"})
    retries: int = field(default=2, metadata={"help": "retries of an infrastructure failure within one invocation"})
    new_run: bool = field(default=False, metadata={"help": "start over even if the config changed (old records kept)"})
    quiet: bool = field(default=False, metadata={"help": "print nothing per episode"})

    def fingerprinted(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in _NOT_FINGERPRINTED}


def default_out(cfg: RunConfig) -> Path:
    slug = "-".join(str(x).replace("/", "_").replace(":", "_") for x in (cfg.suite, Path(cfg.harness).name, cfg.backbone))
    return Path("runs") / slug


_LOAD_LOCK = threading.RLock()


class LazyBackbone:
    """Builds the real backbone on first use, so oracle/random runs never load a model.
    ``id`` is the configured name, which keys the replay cache."""

    def __init__(self, name: str, options: dict):
        from jitlab.llm.base import check_name
        check_name(name)
        self.name, self.options = name, dict(options)
        self.id = name + (json.dumps(options, sort_keys=True) if options else "")
        self._backbone = None

    def get(self):
        with _LOAD_LOCK:  # one load at a time: concurrent first imports of transformers can fail
            if self._backbone is None:
                from jitlab.llm.base import get_backbone
                try:
                    self._backbone = get_backbone(self.name, **self.options)
                except (ConfigError, InfraError):
                    raise
                except Exception as exc:  # a backbone that fails to load is infrastructure, not the harness
                    raise InfraError(f"backbone {self.name} failed to load: {type(exc).__name__}: {exc}") from exc
        return self._backbone

    @property
    def price(self):
        """The loaded backbone's price (None if it has none), for calls it does not price itself (score)."""
        return getattr(self.get(), "price", None)

    def chat(self, messages, **params):
        return self.get().chat(messages, **params)

    def score(self, messages, candidates):
        scorer = getattr(self.get(), "score", None)
        if scorer is None:
            raise NotImplementedError(f"backbone {self.name} has no score()")
        return scorer(messages, candidates)


def _agent_factory(cfg: RunConfig, suite):
    """(harness name, sha, isolation label, make_agent(env, llm))."""
    if cfg.harness == "oracle":
        if not hasattr(suite, "oracle"):
            raise ConfigError(f"suite {cfg.suite} has no oracle")
        return "oracle", f"oracle:{cfg.suite}", "trusted (oracle)", lambda env, llm: suite.oracle(env)
    from jitlab.harness import load_harness, resolve, seed_bank_dir
    folder = resolve(cfg.harness)
    trusted = folder.parent == seed_bank_dir().resolve()
    harness = load_harness(folder) if trusted else None
    if cfg.isolation == "none" or (cfg.isolation == "auto" and trusted):
        if not trusted and not cfg.allow_unisolated:
            raise ConfigError(f"{folder} is not a seed harness: it runs in the sandbox. isolation='none' for "
                              "untrusted code also needs allow_unisolated=True (--allow-unisolated).")
        harness = harness or load_harness(folder)
        label = "in-process (trusted seed)" if trusted else "NONE: untrusted code ran unisolated (--allow-unisolated)"
        return harness.name, harness.sha, label, lambda env, llm: HarnessAgent(harness, llm)
    from jitlab.harness import harness_sha, read_files
    from jitlab.sandbox import SandboxConfig, SandboxedAgent
    from jitlab.sandbox.runner import require_isolation
    sb_cfg = SandboxConfig(allow_unisolated=cfg.allow_unisolated)
    label = require_isolation(sb_cfg)  # refuses here, before any episode, when bubblewrap is unusable
    return folder.name, harness_sha(read_files(folder)), label, lambda env, llm: SandboxedAgent(folder, llm, sb_cfg)


def run(cfg: RunConfig) -> Path:
    """Run (or resume) ``cfg``; returns the run directory holding run.sqlite and summary.json."""
    suite = get_suite(cfg.suite)
    tasks = suite.tasks(cfg.split, cfg.family)[: cfg.limit]
    if not tasks:
        raise ConfigError(f"no tasks in suite {cfg.suite} split {cfg.split} family {cfg.family}")
    out = Path(cfg.out) if cfg.out else default_out(cfg)
    harness_name, sha, isolation, make_agent = _agent_factory(cfg, suite)
    backbone = LazyBackbone(cfg.backbone, cfg.backbone_options)
    budget = Budget(cfg.max_steps, cfg.max_tokens, cfg.max_wall_s)
    from jitlab.llm.cache import default_cache
    cache = default_cache() if cfg.cache else None
    store = RunStore(out, {**cfg.fingerprinted(), "harness_sha": sha}, new_run=cfg.new_run)  # last: it locks `out`

    def one(task) -> None:
        for _ in range(cfg.retries + 1):
            status, attempt = store.status_of(sha, task.id, cfg.seed)
            if status in FINAL:
                return
            episode = store.start_episode(harness_name, sha, task, cfg.seed, attempt, isolation)
            llm = LLMHandle(backbone, budget, cache, on_call=lambda c, e=episode: store.log_call(e, c), seed=cfg.seed)
            env = agent = None
            try:
                env = suite.make_env(task)  # may generate a game: inside the try so the row is always finished
                agent = make_agent(env, llm)
                result = run_episode(env, agent, llm, budget, cfg.seed, on_step=lambda s, e=episode: store.log_step(e, s))
            except InfraError as exc:  # e.g. the sandbox could not start: retried, never a task failure
                result = EpisodeResult(status="infra_error", error=str(exc))
            finally:
                if hasattr(agent, "close"):  # a sandboxed agent holds a child process
                    agent.close()
                if env is not None:
                    env.close()
            store.finish_episode(episode, result.as_dict(), llm)
            if not cfg.quiet:
                print(f"  {task.id:<32} {result.status:<13} success={int(result.success)} reward={result.reward:.2f} "
                      f"steps={result.steps:<3} tokens={llm.tokens:<6} {result.wall_s:6.1f}s", flush=True)
            if result.status in FINAL:
                return
            time.sleep(min(2.0, 0.1 * 2 ** attempt))

    try:
        if cfg.concurrency <= 1:
            for task in tasks:
                one(task)
        else:
            with ThreadPoolExecutor(cfg.concurrency) as pool:
                list(pool.map(one, tasks))
    finally:
        store.close()
    summarize(out)
    return out
