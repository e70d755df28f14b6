"""The episode options and run controls, declared once: every config that plays episodes (``jitlab run``, ``jit``,
``engineer run|table``, ``transfer``, the training stages that play episodes) takes them from here by inheritance,
and hands them to the runs it makes with :func:`derive`. ``jitlab batch`` takes the caps (:class:`SpendCaps`) too.

    @dataclass
    @adjust(defaults={"concurrency": 6})            # another default; help and bounds stay as declared here
    class EngineerConfig(EpisodeOptions, RunControls, Quiet):
        suite: str = ...
    rc = derive(RunConfig, cfg, suite=cfg.suite, harness=..., out=..., quiet=True)   # the options carried over
    spend = cfg.command_spend(cfg.out)              # one RunSpend: the caps bound the whole command

The classes, each a set of fields (help, defaults, bounds: jitlab/fields.py, the CLI options: jitlab/cli/options.py):

- :class:`EpisodeWall` -- ``max_wall_s``: the wall budget of one episode;
- :class:`EpisodeBudget` -- that and ``max_steps``, ``max_tokens`` (:meth:`EpisodeBudget.budget`: a runtime.Budget);
- :class:`Isolation` -- ``allow_unisolated``;
- :class:`EpisodeOptions` -- the budget, isolation, ``seed`` and ``cache``;
- :class:`SpendCaps` -- ``max_cost`` / ``max_tokens_total``: real backbone spend (replay-cache hits are free) of the
  whole command, every run it makes and every phase, counted with what is already recorded under its output
  (``$JITLAB_SPEND_ROOT`` when set: a ``jitlab batch`` counts all its notebooks); a rerun with higher caps resumes;
  and ``max_wall_total_s``: the wall seconds of this invocation of the whole command, counted from when its RunSpend
  is made (past invocations' time is not counted, so a plain rerun resumes); once a cap is reached no new episode or
  backbone call starts (jitlab.runtime.RunSpend);
- :class:`RunControls` -- the caps, ``concurrency`` and ``retries``, and :class:`Quiet` -- ``quiet``: how fast a
  command goes, when it stops and what it prints, not what it computes (:data:`NOT_FINGERPRINTED`);
- :class:`NewRun` -- ``new_run``: a run directory's records start over when its config changed.

A config whose option means something narrower says so with :func:`adjust` (its help or default), never with a
second declaration. Config file keys and CLI option names are the field names, as before.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from jitlab.fields import RETRIES_MAX, SEED_MAX, STEPS_MAX, WORKERS_MAX, check_number
from jitlab.runtime import EPISODE_MAX_TOKENS, EPISODE_MAX_WALL_S, Budget, RunSpend
from jitlab.store import DB_NAME, recorded_spend

__all__ = [
    "CAP_NAMES",
    "NOT_FINGERPRINTED",
    "OPTION_CLASSES",
    "SPEND_ROOT_ENV",
    "EpisodeBudget",
    "EpisodeOptions",
    "EpisodeWall",
    "Isolation",
    "NewRun",
    "Quiet",
    "RunControls",
    "SpendCaps",
    "adjust",
    "derive",
    "option_names",
    "shared_spend",
]

SPEND_ROOT_ENV = "JITLAB_SPEND_ROOT"  # a command's spend caps count every run recorded here (jitlab batch: its OUT)


@dataclass
class EpisodeWall:
    max_wall_s: float = field(default=EPISODE_MAX_WALL_S, metadata={"help": "wall seconds per episode", "min_exclusive": 0})


@dataclass
class EpisodeBudget(EpisodeWall):
    max_steps: int | None = field(
        default=None, metadata={"help": "step cap of each episode; default: each task's own", "min": 1, **STEPS_MAX}
    )
    max_tokens: int = field(default=EPISODE_MAX_TOKENS, metadata={"help": "backbone tokens per episode", "min": 1})

    def budget(self) -> Budget:
        """The runtime Budget of one episode."""
        return Budget(self.max_steps, self.max_tokens, self.max_wall_s)


@dataclass
class Isolation:
    allow_unisolated: bool = field(
        default=False,
        metadata={"help": "DANGEROUS: run untrusted harness code (or patches) without bubblewrap (recorded loudly)"},
    )


@dataclass
class EpisodeOptions(EpisodeBudget, Isolation):
    seed: int = field(
        default=0, metadata={"help": "episode seed of every run (env reset and cache key)", "min": 0, "max": SEED_MAX}
    )
    cache: bool = field(default=True, metadata={"help": "use the replay cache"})


@dataclass
class SpendCaps:
    max_cost: float | None = field(
        default=None,
        metadata={
            "help": "cap in USD on the real backbone spend of the whole "
            "command, every run and phase (cache hits are "
            "free); rerun with more to resume",
            "min": 0,
            "metavar": "USD",
        },
    )
    max_tokens_total: int | None = field(
        default=None,
        metadata={
            "help": "cap on the backbone tokens of the whole command, every run and phase (cache hits are free)",
            "min": 0,
            "metavar": "N",
        },
    )
    max_wall_total_s: float | None = field(
        default=None,
        metadata={
            "help": "cap on the wall seconds of this invocation of the whole command, every run and phase, counted "
            "from its start (past invocations' time does not count): no new episode or backbone call starts "
            "after it; rerun to resume",
            "min": 0,
            "metavar": "S",
        },
    )

    def caps(self) -> dict:
        """The caps by name (every field of :class:`SpendCaps`), as :class:`RunSpend` and :func:`shared_spend` take
        them."""
        return {name: getattr(self, name) for name in CAP_NAMES}

    def run_spend(self, cost: float = 0.0, tokens: int = 0) -> RunSpend:
        """A RunSpend of one run under these caps, seeded with its recorded ``cost`` / ``tokens``."""
        return RunSpend(**self.caps(), cost=cost, tokens=tokens)

    def command_spend(self, root: str | Path) -> RunSpend | None:
        """The one RunSpend every run of this command shares (:func:`shared_spend` under ``root``); None without a
        cap."""
        return shared_spend(root, **self.caps())


CAP_NAMES = tuple(f.name for f in fields(SpendCaps))  # the caps of a whole command, as RunSpend takes them


@dataclass
class RunControls(SpendCaps):
    concurrency: int = field(
        default=1, metadata={"help": "episodes run at once (the hf engine batches their calls)", "min": 1, **WORKERS_MAX}
    )
    retries: int = field(
        default=2, metadata={"help": "retries of an infrastructure failure within one invocation", "min": 0, **RETRIES_MAX}
    )


@dataclass
class Quiet:
    quiet: bool = field(default=False, metadata={"help": "print nothing per episode (or per task, candidate, run)"})


# in the order --help lists their options: what an episode runs under, then how the command runs
@dataclass
class NewRun:
    new_run: bool = field(default=False, metadata={"help": "start over even if the config changed (old records kept)"})


OPTION_CLASSES = (EpisodeOptions, EpisodeBudget, EpisodeWall, Isolation, RunControls, SpendCaps, Quiet, NewRun)
# how fast a run goes or when it stops, not what it computes: out of a run's fingerprint (a run stopped by its spend
# cap resumes with a higher one, one stopped by its wall cap with any)
NOT_FINGERPRINTED = (*(f.name for f in fields(RunControls)), "quiet")


def option_names(*classes) -> tuple[str, ...]:
    """The option field names of ``classes`` (default: every option class), in the order of :data:`OPTION_CLASSES`."""
    wanted = {f.name for cls in classes or OPTION_CLASSES for f in fields(cls)}
    return tuple(n for cls in OPTION_CLASSES for n in cls.__dict__.get("__annotations__", {}) if n in wanted)


def shared_spend(root: str | Path, max_cost: float | None = None, max_tokens_total: int | None = None,
                 max_wall_total_s: float | None = None) -> RunSpend | None:
    """A RunSpend shared by several runs, seeded with the real spend of every run recorded under
    ``$JITLAB_SPEND_ROOT`` (when set) or else ``root``; its wall clock starts now. None when no cap is given."""
    if max_cost is None and max_tokens_total is None and max_wall_total_s is None:
        return None
    check_number("max_cost", max_cost, "float", optional=True, min=0)
    check_number("max_tokens_total", max_tokens_total, optional=True, min=0)
    check_number("max_wall_total_s", max_wall_total_s, "float", optional=True, min=0)
    base = Path(os.environ.get(SPEND_ROOT_ENV) or root)
    cost = tokens = 0
    for db in sorted(base.rglob(DB_NAME)) if base.is_dir() else []:
        c, t = recorded_spend(db.parent)
        cost, tokens = cost + c, tokens + t
    return RunSpend(max_cost, max_tokens_total, cost, tokens, max_wall_total_s)


def derive(cls, source, **values):
    """``cls(**values)`` with every option field that ``cls`` has and ``source`` takes from an option class
    (:data:`OPTION_CLASSES`: not a same-named field of its own, such as a training config's data ``seed``) taken from
    ``source`` unless ``values`` gives it: what a command hands to each run it makes, with no field copied by hand."""
    mine = {f.name for f in fields(cls)}
    theirs = {f.name for base in type(source).__mro__ if base in OPTION_CLASSES for f in fields(base)}
    carried = {n: getattr(source, n) for n in option_names() if n in mine and n in theirs and n not in values}
    return cls(**carried, **values)


def adjust(defaults: dict | None = None, help: dict | None = None):  # noqa: A002  (the metadata key it sets)
    """Class decorator (under ``@dataclass``): other ``defaults`` or ``help`` for option fields the class inherits,
    their bounds and the rest of their metadata kept, so an option is declared once however many configs take it."""

    def wrap(cls):
        inherited = {f.name: f for base in cls.__mro__[1:] if dataclasses.is_dataclass(base) for f in fields(base)}
        own = cls.__dict__.get("__annotations__")
        if own is None:
            own = {}
            cls.__annotations__ = own
        for name in {**(defaults or {}), **(help or {})}:
            if name not in inherited:
                raise TypeError(f"adjust: {cls.__name__} inherits no option {name!r}")
            base = inherited[name]
            meta = {**base.metadata, **({"help": help[name]} if help and name in help else {})}
            default = (defaults or {}).get(name, base.default)
            own[name] = base.type
            setattr(cls, name, field(default=default, metadata=meta))
        return cls

    return wrap
