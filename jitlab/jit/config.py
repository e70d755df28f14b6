"""The JIT run's configuration (``JITConfig``: fields, checks, fingerprint), its cost estimate and default run
directory. What a run does with it is in jitlab.jit.inference (the front) and jitlab.jit.loop (one task)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.cluster import check_executor
from jitlab.errors import ConfigError
from jitlab.fields import (
    CANDIDATES_MAX,
    REFERENCES_MAX,
    REPEATS_MAX,
    RETRIES_MAX,
    ROUNDS_MAX,
    STEPS_MAX,
    check_fields,
)
from jitlab.jit.generate.base import generator_backbone
from jitlab.jit.generate.select import SELECTORS
from jitlab.llm.base import DEFAULT_BACKBONE, check_name
from jitlab.llm.pricing import known_price
from jitlab.run_options import NOT_FINGERPRINTED, EpisodeOptions, NewRun, Quiet, RunControls, adjust

__all__ = ["IMPLIED", "MODES", "PHASES", "JITConfig", "cost_estimate", "default_out"]

MODES = ("static", "streaming")
PHASES = ("generate", "select", "repair", "execute")
# how fast a run goes or when it stops, not what it computes (a run stopped by its spend cap resumes with more)
_NOT_FINGERPRINTED = ("out", "new_run", "executor", *NOT_FINGERPRINTED)
# fields a fingerprint leaves out at the value runs had before the field existed (what their absence stands for;
# option_evidence: runs before it used the references' evidence)
IMPLIED = {"repeat": 1, "bank_rule": "dominance", "option_evidence": "references"}


@dataclass
@adjust(help={"seed": "episode seed (env reset, cache key, generator randomness)",
              "max_tokens": "execution tokens per episode",
              "concurrency": "static mode: tasks solved at once (a stream is solved in order, so streaming needs 1)",
              "quiet": "print nothing per task"})
class JITConfig(EpisodeOptions, RunControls, Quiet, NewRun):
    suite: str = field(default="textworld", metadata={"help": "suite name (jitlab suites), or a mixed stream: "
                                                                "mix:<a>+<b>[@shuffle seed] | mix:<spec.yaml>"})
    mode: str = field(default="streaming", metadata={"help": "static (N candidates, pick one) or streaming "
                                                             "(retrieve, generate, run, update the bank)", "choices": MODES})
    generator: str = field(default="compose", metadata={"help": "compose | code:<backbone> | plan:<backbone>"})
    backbone: str = field(default=DEFAULT_BACKBONE, metadata={"help": "backbone that runs the harness (and scores "
                                                                      "compose's options)"})
    backbone_options: dict = field(default_factory=dict, metadata={"help": "extra backend options of the backbones"})
    judge_backbone: str | None = field(default=None, metadata={"help": "backbone of the judge selector "
                                                                       "(default: --backbone)"})
    split: str = field(default="dev", metadata={"help": "a split of the suite: dev, test, train, holdout (jitlab suites)"})
    family: str | None = field(default=None, metadata={"help": "only tasks of this family"})
    limit: int | None = field(default=None, metadata={"help": "first N tasks of the split (the stream)", "min": 1})
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
    option_evidence: str = field(default="bank", metadata={
        "help": "what compose's bank bonus and mutation rules read: every evaluated entry of the 'bank' (a re-pick "
                "never moves to an option doing worse there than the current one) or only the k 'references' (as "
                "runs made before this option; resume those with it); the other generators read their references",
        "choices": ("references", "bank")})
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
    gen_max_tokens: int = field(default=40_000, metadata={"help": "tokens per generation/repair call set", "min": 1})
    retrieval: str = field(default="auto", metadata={"help": "bank retrieval: auto | embedding | bm25",
                                                       "choices": ("auto", "embedding", "bm25")})
    bank_rule: str = field(default="dominance", metadata={"help": "when a newcomer removes a frontier member: "
                                                                   "dominance | paired (also an exact McNemar win; "
                                                                   "jitlab/selection.py)",
                                                           "choices": ("dominance", "paired")})
    bank_cost_metric: str = field(default="tokens", metadata={"help": "frontier cost axis: tokens | cost",
                                                               "choices": ("tokens", "cost")})
    out: str | None = field(default=None, metadata={"help": "run directory (default runs/jit-<suite>-<mode>-<generator>)",
                                                    "nonempty": True})
    executor: str = field(default="local", metadata={"help": "static mode: 'local' (threads of this process) or 'ray' "
                                                            "(one Ray task per task, --concurrency at once; this process "
                                                            "alone writes the records; RAY_ADDRESS picks the cluster)",
                                                    "choices": ("local", "ray")})

    def __post_init__(self):
        check_fields(self)

    def candidates(self) -> int:
        return self.n_candidates or (4 if self.mode == "static" else 1)

    def fingerprinted(self) -> dict:
        fp = {k: v for k, v in asdict(self).items() if k not in _NOT_FINGERPRINTED}
        for name, value in IMPLIED.items():  # run directories made before these fields existed must still resume
            if fp[name] == value:
                del fp[name]
        return fp

    def check(self) -> None:
        check_fields(self)
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
