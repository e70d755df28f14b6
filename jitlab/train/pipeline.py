"""The whole training pipeline as one resumable command, and the steps the stage notebooks (02-04) call.

    jitlab train pipeline --config jitlab/train/configs/pipeline.yaml --out runs/pipeline/textworld  # make pipeline
    from jitlab.train.pipeline import PipelineConfig, run_pipeline, run_steps
    run_steps(cfg, out, ["baselines", "data1", "stage1", "validity"])                      # notebook 02

Steps (the table ``PIPELINE``: name, the config fields it reads, what it runs; ``STEPS`` names them in order; each
writes under ``out``):

    baselines  seed harnesses on the first ``baseline_limit`` tasks of ``baseline_split`` (train by default:
               disjoint from dev, where a best seed is picked, and from the held-out test tasks) with ``executor``
               (jitlab.experiments.run_grid): the offline teacher's evidence -> baselines/<suite>/<seed>-<executor>/.
               Skipped when ``runs`` is given.
    data1      Stage I data (jitlab.train.data.build_stage1) from those runs and ``banks`` -> data1/
    stage1     SFT then DPO (jitlab.train.stage1) -> stage1/adapter
    data2      Stage II data (jitlab.train.repair_data.build_stage2), data1's plans as inputs too -> data2/
    stage2     repair SFT on the Stage I adapter, held-out repair evaluation (jitlab.train.stage2) -> stage2/
    stage3     Evo-GDPO (jitlab.train.stage3), from the newest adapter, candidates run with ``executor`` -> stage3/
    validity   per policy of ``eval_policies`` (base = the untrained ``plan:<base>``, stageN = ``plan:hf:<stageN
               adapter>``): one plan per task on its ``eval_limit_of`` held-out tasks (jitlab.train.evaluate): parse
               rate, first-try validity, repair success within ``repair_rounds`` rounds -> validity/<policy>/summary.json
    streaming  streaming JIT of each policy on the same test tasks (success, tokens per task per phase)
               -> streaming/<policy>/
    figures    training curves (from TRL's TensorBoard logs), Stage III reward channels, the closing table and its
               paired comparisons (jitlab.train.report.closing_table, paired_table; ``compare_runs`` beside the
               policies) -> figures/ (PNG, PDF, HTML, README.md)

Each policy plays the first ``eval_limit_of(cfg, policy)`` tasks of the split's own (stratified) order:
``eval_limits`` names the policies that play fewer (or more) than ``eval_limit``, so a smaller row's tasks are a
prefix of a full row's and pair with them (a streaming JIT on a prefix is the full stream's first part: the state a
task sees depends only on the tasks before it, jitlab.jit.inference).

Every stage's own config is the stage dataclass (jitlab.train.config) with the pipeline's wiring (data folders,
adapters, suite) and the YAML mapping given under the stage's key (``stage1: {sft_steps: 20}``). ``pipeline.json``
records each step's inputs, outputs and wall time. Every stage's config (and the keys of ``baseline_options`` and
``eval_options``, and that each of ``compare_runs`` is a run on ``suite`` and ``eval_split``, or on the same tasks of
that split in its order under another spelling of the suite, e.g. a mix spec) is checked before the
first step runs, so a typo in Stage III's mapping fails at once. A rerun
skips a finished step whose inputs are unchanged, whose folder is still there and none of whose upstream steps
(``after``: Stage II reads Stage I's adapter) ran after it; the stages themselves resume a killed training from its
last checkpoint. A step whose folder holds a run of other inputs (it ran, or was stopped, before the config or
the data it reads changed: the stage refuses to resume it, ConfigDrift) starts over, its old folder kept as
``<step>.replaced-<k>``. Each policy's evaluation folder records the adapter it evaluated (``policy.json``), so a
stage trained again into the same path is evaluated afresh, not given the old weights' results. One process writes
a pipeline folder, and one a policy's validity folder, at a time (``writer.lock``, jitlab.store.sole_writer): a second
gets RunLocked naming the first; a policy's evaluation may run ahead of its step in another process (its own folder),
and the step then finds it recorded.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import ConfigDrift, ConfigError
from jitlab.experiments import run_grid, seed_harnesses
from jitlab.fields import ROUNDS_MAX, STEPS_MAX, WORKERS_MAX, check_fields, check_number
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.llm.base import hf_folder
from jitlab.llm.hf import release
from jitlab.paths import repo_root
from jitlab.plumbing import set_aside
from jitlab.run_options import Isolation
from jitlab.runner import RunConfig
from jitlab.store import sole_writer
from jitlab.train.config import (
    FORMATS,
    Stage1Config,
    Stage1DataConfig,
    Stage2Config,
    Stage2DataConfig,
    Stage3Config,
    check_format,
    load_config,
)
from jitlab.train.data import build_stage1
from jitlab.train.evaluate import evaluate_generator
from jitlab.train.records import REPLACED, file_sha256, write_json
from jitlab.train.repair_data import build_stage2
from jitlab.train.report import EVAL_COLUMNS, pipeline_figures
from jitlab.train.stage1 import run_stage1
from jitlab.train.stage2 import evaluate_repair, run_stage2
from jitlab.train.stage3 import run_stage3

__all__ = ["PIPELINE", "POLICIES", "STEPS", "PipelineConfig", "Step", "check_stages", "code_references",
           "eval_limit_of", "evaluate_policies", "k_references",
           "pipeline_run", "policy_backbones", "read_manifest", "repair_before", "run_pipeline", "run_steps",
           "stage_overrides"]

POLICIES = ("base", "stage1", "stage2", "stage3")


@dataclass
class PipelineConfig(Isolation):
    """Seed baselines -> Stage I data -> Stage I -> Stage II data -> Stage II -> Stage III -> evaluations -> figures."""
    suite: str = field(default="textworld", metadata={"help": "suite the data, Stage III and the evaluations use",
                                                      "nonempty": True})
    format: str = field(default="plan", metadata={"help": "what the student writes: plans (plan:<backbone>) or "
                                                          "harness files (code:<backbone>)", "choices": FORMATS})
    executor: str = field(default="embedded", metadata={"help": "frozen backbone that runs every episode (baselines, "
                                                                "Stage III candidates, evaluations)", "nonempty": True})
    seeds: list = field(default_factory=list, metadata={"help": "seed harnesses of the baseline grid (default: all "
                                                                "seeds, baselines excluded)"})
    baseline_split: str = field(default="train", metadata={"help": "split of the baselines' tasks: train (disjoint "
                                                                   "from the dev picks and the held-out evaluation) "
                                                                   "or dev; never test or holdout",
                                                           "choices": ["train", "dev"]})
    baseline_limit: int = field(default=5, metadata={"help": "tasks per seed baseline (the first of baseline_split)",
                                                     "min": 1})
    baseline_options: dict = field(default_factory=dict, metadata={"help": "RunConfig fields of the baselines, e.g. "
                                                                           "{max_steps: 10} (not those the pipeline "
                                                                           "sets: split, limit, ...)"})
    runs: list = field(default_factory=list, metadata={"help": "reuse these run directories as the teacher's evidence "
                                                               "(the baselines step is then skipped)"})
    banks: list = field(default_factory=list, metadata={"help": "bank.sqlite files whose evaluations count too"})
    data1: dict = field(default_factory=dict, metadata={"help": "Stage1DataConfig fields"})
    stage1: dict = field(default_factory=dict, metadata={"help": "Stage1Config fields"})
    data2: dict = field(default_factory=dict, metadata={"help": "Stage2DataConfig fields"})
    stage2: dict = field(default_factory=dict, metadata={"help": "Stage2Config fields"})
    stage3: dict = field(default_factory=dict, metadata={"help": "Stage3Config fields"})
    eval_policies: list = field(default_factory=lambda: list(POLICIES), metadata={
        "help": "policies evaluated: base (untrained), stage1, stage2, stage3 (those not trained are skipped)"})
    eval_split: str = field(default="test", metadata={"help": "split of the held-out evaluation tasks (dev only when "
                                                              "no evidence split is dev: evidence_splits)",
                                                      "choices": ["dev", "test"]})
    eval_limit: int = field(default=10, metadata={"help": "held-out tasks per evaluation (of the policies eval_limits "
                                                          "does not name)", "min": 1})
    eval_limits: dict = field(default_factory=dict, metadata={
        "help": "held-out tasks of the policies that play another number than eval_limit, e.g. {stage1: 18}: the "
                "first N of the same task order, so they pair with the full rows"})
    repair_rounds: int = field(default=2, metadata={"help": "repair rounds allowed in the validity evaluation",
                                                    "min": 0, **ROUNDS_MAX})
    eval_max_new_tokens: int = field(default=160, metadata={"help": "tokens per plan (and repaired plan) in the "
                                                                    "validity evaluation", "min": 8})
    eval_smoke_steps: int = field(default=2, metadata={"help": "validation smoke steps in the validity evaluation",
                                                       "min": 0, **STEPS_MAX})
    eval_concurrency: int = field(default=1, metadata={"help": "held-out tasks of the validity evaluation run at once "
                                                               "(their calls batch in the hf engine)", "min": 1, **WORKERS_MAX})
    eval_options: dict = field(default_factory=dict, metadata={"help": "JITConfig fields of the evaluations, e.g. "
                                                                       "{max_steps: 10, retrieval: bm25}"})
    threads: int | None = field(default=None, metadata={"help": "torch CPU threads of every training stage", "min": 1})
    compare_runs: list = field(default_factory=list, metadata={
        "help": "streaming JIT runs (run directories or exports) on the same suite and eval_split shown beside the "
                "policies in the closing table, the final policy paired with each (e.g. the compose JIT's export)"})

    def __post_init__(self):
        if self.baseline_split not in ("train", "dev"):  # before the generic choices check, to say why
            raise ConfigError(f"baseline_split must be train or dev, got {self.baseline_split!r}: the teacher's "
                              "evidence is never gathered on the test or holdout tasks the policies are evaluated on")
        check_fields(self)
        check_format(self.format)
        for key, owned in _SET_BY_PIPELINE.items():  # options the pipeline itself passes (a TypeError later)
            clash = [k for k in owned if isinstance(getattr(self, key), dict) and k in getattr(self, key)]
            if clash:
                raise ConfigError(f"{key}: {clash[0]} is set by the pipeline ({owned[clash[0]]}); set it there, "
                                  f"not in {key}")
        bad = sorted(set(self.eval_policies) - set(POLICIES))
        if bad:
            raise ConfigError(f"eval_policies: unknown {', '.join(bad)}; use {', '.join(POLICIES)}")
        if not isinstance(self.eval_limits, dict):
            raise ConfigError(f"eval_limits must be a mapping of policy to tasks, e.g. {{stage1: 18}}; got "
                              f"{self.eval_limits!r}")
        bad = sorted(set(self.eval_limits) - set(POLICIES), key=str)
        if bad:
            raise ConfigError(f"eval_limits: unknown policy {', '.join(map(str, bad))}; use {', '.join(POLICIES)}")
        for policy, limit in self.eval_limits.items():
            check_number(f"eval_limits: {policy}", limit, "int", min=1)
        shared = [f"{source} {split}" for source, splits in evidence_splits(self).items() for split in splits
                  if split == self.eval_split]
        if shared:
            raise ConfigError(f"eval_split {self.eval_split} is also where the policies' evidence comes from "
                              f"({', '.join(shared)}): the evaluation would run on the tasks they learnt from; "
                              "evaluate on test (eval_split: test), or take every evidence split from train")


# the options each *_options mapping must not set: the pipeline passes them itself (field that sets each)
_SET_BY_PIPELINE = {
    "baseline_options": {"suite": "suite", "harness": "seeds", "backbone": "executor", "split": "baseline_split",
                         "limit": "baseline_limit", "out": "its folder's baselines/", "allow_unisolated": "allow_unisolated"},
    "eval_options": {"suite": "suite", "mode": "streaming", "generator": "eval_policies", "backbone": "executor",
                     "split": "eval_split", "limit": "eval_limit, eval_limits", "out": "its folder's streaming/"},
}


def evidence_splits(cfg: PipelineConfig) -> dict[str, list[str]]:
    """Where the policies learn from, by the option that says it: the baselines' split, the splits Stage I data
    takes examples from, Stage III's training tasks (each as the pipeline's config sets it, else its default)."""
    data1 = cfg.data1 if isinstance(cfg.data1, dict) else {}
    stage3 = cfg.stage3 if isinstance(cfg.stage3, dict) else {}
    splits = data1.get("splits", Stage1DataConfig.__dataclass_fields__["splits"].default_factory())
    return {"baseline_split": [cfg.baseline_split],
            "data1 splits": list(splits) if isinstance(splits, list | tuple) else [splits],
            "stage3 split": [stage3.get("split", Stage3Config.__dataclass_fields__["split"].default)]}


def _stage(cls, overrides: dict, wiring: dict, key: str):
    """``cls`` from the pipeline's wiring, then the user's mapping under ``key`` (which wins); unknown keys are
    one-line ConfigErrors naming the key."""
    try:
        return load_config(cls, None, None, **{**wiring, **overrides})
    except ConfigError as exc:
        raise ConfigError(f"pipeline config, {key}: {exc}") from None


def _data1_field(cfg: PipelineConfig, name: str) -> int:
    """Stage I data's field ``name`` as the pipeline sets it (its ``data1`` mapping, else the default)."""
    return int(cfg.data1.get(name, Stage1DataConfig.__dataclass_fields__[name].default))


def k_references(cfg: PipelineConfig) -> int:
    """References per plan prompt: Stage I data's ``k_references``, which Stage III and both evaluations reuse, so a
    policy is trained and evaluated on the prompt JIT inference sends."""
    return _data1_field(cfg, "k_references")


def code_references(cfg: PipelineConfig) -> int:
    """References shown with their code in a code prompt: Stage I data's ``code_references`` (see k_references)."""
    return _data1_field(cfg, "code_references")


def _adapter(out: Path, *stages: str) -> str | None:
    """The newest of ``stages``' adapters that exists (stage folders under ``out``)."""
    for stage in stages:
        if (out / stage / "adapter" / "adapter_config.json").is_file():
            return str(out / stage / "adapter")
    return None


def policy_backbones(cfg: PipelineConfig, out: str | Path) -> dict[str, str]:
    """``{policy: backbone}`` for the ``eval_policies`` that exist: ``base`` -> the stages' base (untrained),
    ``stageN`` -> ``hf:<out>/stageN/adapter`` (when trained). The generator is ``plan:<backbone>``."""
    out = Path(out)
    backbones = {}
    for policy in cfg.eval_policies:
        if policy == "base":
            backbones[policy] = cfg.stage1.get("base", "embedded")
        elif _adapter(out, policy):
            backbones[policy] = f"hf:{_adapter(out, policy)}"
    return backbones


def eval_limit_of(cfg: PipelineConfig, policy: str) -> int:
    """How many held-out tasks ``policy`` plays (the first of the split): its ``eval_limits`` entry, else ``eval_limit``."""
    return cfg.eval_limits.get(policy, cfg.eval_limit)


def evaluate_policies(cfg: PipelineConfig, out: str | Path, mode: str = "validity", policies=None) -> dict:
    """Each policy (default: ``policy_backbones``) on its ``eval_limit_of`` held-out tasks -> ``out/<mode>/<policy>/``; returns
    {policy: summary}. ``validity``: jitlab.train.evaluate.evaluate_generator (parse rate, first-try validity, repair
    success within ``repair_rounds``); ``streaming``: a streaming JIT run of ``plan:<backbone>`` with ``executor``."""
    out = Path(out)
    result = {}
    for policy, backbone in (policies or policy_backbones(cfg, out)).items():
        _claim(out / mode / policy, backbone)
        if mode == "validity":
            result[policy] = evaluate_generator(
                backbone, out / mode / policy, suite=cfg.suite, split=cfg.eval_split, limit=eval_limit_of(cfg, policy),
                rounds=cfg.repair_rounds, max_new_tokens=cfg.eval_max_new_tokens, executor=cfg.executor,
                smoke_steps=cfg.eval_smoke_steps, allow_unisolated=cfg.allow_unisolated, k_references=k_references(cfg),
                format=cfg.format, code_references=code_references(cfg), concurrency=cfg.eval_concurrency)
        else:
            jit = JITConfig(suite=cfg.suite, mode="streaming", generator=f"{cfg.format}:{backbone}", backbone=cfg.executor,
                            split=cfg.eval_split, limit=eval_limit_of(cfg, policy), out=str(out / mode / policy),
                            **{"allow_unisolated": cfg.allow_unisolated, "quiet": True,
                               "k_references": max(1, k_references(cfg)), **cfg.eval_options})
            summary = json.loads((run_jit(jit) / "summary.json").read_text())
            result[policy] = {k: summary.get(k) for k in EVAL_COLUMNS[1:]}
        if folder := hf_folder(backbone):   # each policy's model is loaded once: free it before the next (~3 GB each)
            release(folder)
    return result


def _claim(folder: Path, backbone: str) -> None:
    """Make ``folder`` the evaluation of ``backbone``'s weights as they are now (``policy.json``: the backbone and its
    adapter's sha256): one holding another adapter's (a stage trained again into the same path) is set aside as
    ``<policy>.replaced-<k>``, since a rerun would otherwise return or resume the old weights' results. A folder
    without the record (made before it existed) is taken as the current weights'."""
    adapter = hf_folder(backbone)
    now = {"backbone": backbone, "sha256": file_sha256(Path(adapter) / "adapter_model.safetensors") if adapter else None}
    mark = folder / "policy.json"
    if mark.is_file() and json.loads(mark.read_text()) != now:
        set_aside(folder, REPLACED)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(mark, now)


def _common(cfg: PipelineConfig) -> dict:
    return {"allow_unisolated": cfg.allow_unisolated}


def _train(cfg: PipelineConfig) -> dict:
    return {"threads": cfg.threads} if cfg.threads else {}


def _baseline_runs(out: Path) -> list:
    """The run directories the baselines step recorded ([] before it has run)."""
    step = _manifest(out)["steps"].get("baselines") or {}
    return (step.get("outputs") or {}).get("runs", []) if step.get("status") == "done" else []


def _wire_data1(cfg: PipelineConfig, out: Path) -> dict:
    return {"runs": cfg.runs or _baseline_runs(out), "banks": cfg.banks, "format": cfg.format, **_common(cfg)}


def _wire_stage1(cfg: PipelineConfig, out: Path) -> dict:
    return {"data": str(out / "data1"), **_train(cfg)}


def _wire_data2(cfg: PipelineConfig, out: Path) -> dict:
    wiring = {"suite": cfg.suite, "formats": [cfg.format], **_common(cfg)}
    if (out / "data1" / "sft.jsonl").is_file():
        wiring["stage1_data"] = str(out / "data1")
    return wiring


def _wire_stage2(cfg: PipelineConfig, out: Path) -> dict:
    return {"data": str(out / "data2"), "stage1": _adapter(out, "stage1"), "formats": [cfg.format],
            "rehearsal": str(out / "data1") if (out / "data1" / "sft.jsonl").is_file() else None, **_common(cfg),
            **_train(cfg)}


def _wire_stage3(cfg: PipelineConfig, out: Path) -> dict:
    return {"suite": cfg.suite, "executor": cfg.executor, "policy": _adapter(out, "stage2", "stage1"),
            "k_references": k_references(cfg), "format": cfg.format, "code_references": code_references(cfg),
            **_common(cfg), **_train(cfg)}


def _config(name: str, cfg: PipelineConfig, out: Path):
    """The stage config step ``name`` runs with: its class from the pipeline's wiring, then the user's mapping."""
    step = STEP_TABLE[name]
    return _stage(step.stage, getattr(cfg, name), step.wiring(cfg, out), name)


def _run_baselines(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    seeds = cfg.seeds or seed_harnesses()
    inputs = {"seeds": seeds, "executor": cfg.executor, "split": cfg.baseline_split, "limit": cfg.baseline_limit,
              **cfg.baseline_options}
    if cfg.runs:
        return {"runs": cfg.runs}, {"skipped": "runs given", "runs": cfg.runs}
    # absolute: run_grid takes a relative out_root from the repository root, every other step from the working
    # directory, and a pipeline's folder is one place
    rows = run_grid(cfg.suite, seeds, cfg.executor, limit=cfg.baseline_limit, out_root=out.absolute() / "baselines",
                    split=cfg.baseline_split, allow_unisolated=cfg.allow_unisolated, **cfg.baseline_options)
    return inputs, {"runs": list(rows["run_dir"]), "success_rate": dict(zip(rows["harness"], rows["success_rate"]))}


def _run_data1(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    if not cfg.runs:
        _done(out, "baselines")
    data = _config("data1", cfg, out)
    return asdict(data), {"counts": build_stage1(data, out / "data1")["counts"]}


def _run_stage1(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    s1 = _config("stage1", cfg, out)
    return asdict(s1), _phases(run_stage1(s1, out / "stage1"))


def _run_data2(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    data = _config("data2", cfg, out)
    return asdict(data), {"counts": build_stage2(data, out / "data2")["counts"]}


def _run_stage2(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    s2 = _config("stage2", cfg, out)
    manifest = run_stage2(s2, out / "stage2")
    return asdict(s2), {**_phases(manifest), "eval": manifest.get("eval")}


def _run_stage3(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    s3 = _config("stage3", cfg, out)
    manifest = run_stage3(s3, out / "stage3")
    return asdict(s3), {**_phases(manifest), "summary": manifest["summary"]}


def _run_validity(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    return _fingerprint(cfg, out, "validity"), evaluate_policies(cfg, out, "validity")


def _run_streaming(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    return _fingerprint(cfg, out, "streaming"), evaluate_policies(cfg, out, "streaming")


def _run_figures(cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    return {"steps": sorted(_manifest(out)["steps"]), "compare_runs": cfg.compare_runs}, \
        {"files": pipeline_figures(out, cfg.compare_runs)}


def _eval_inputs(cfg: PipelineConfig, out: Path) -> dict:
    """What an evaluation reads besides config fields: the policies that exist and the prompts' reference counts."""
    return {"backbones": policy_backbones(cfg, out), "k_references": k_references(cfg),
            "code_references": code_references(cfg)}


@dataclass(frozen=True)
class Step:
    """One pipeline step. ``reads``: the PipelineConfig fields it depends on (with ``more``, its fingerprint: a change
    reruns it); ``run(cfg, out)`` does it and returns (inputs, outputs). A step that builds a stage config names its
    class (``stage``, from the pipeline's ``wiring(cfg, out)`` and the mapping under the step's name), checked for
    every stage before any step runs."""
    name: str
    reads: tuple[str, ...]
    run: Callable[[PipelineConfig, Path], tuple[dict, dict]]
    stage: type | None = None
    wiring: Callable[[PipelineConfig, Path], dict] | None = None
    more: Callable[[PipelineConfig, Path], dict] | None = None
    after: tuple[str, ...] = ()    # the steps whose outputs it reads: one of them run again reruns it
    folder: bool = True            # it writes out/<name>/: a finished step whose folder is gone runs again


_EVAL = ("suite", "executor", "eval_policies", "eval_split", "eval_limit", "eval_limits")
_POLICIES = POLICIES[1:]   # the trained ones: their adapters are what the evaluations read
PIPELINE = (
    Step("baselines", ("suite", "executor", "seeds", "baseline_split", "baseline_limit", "baseline_options", "runs"),
         _run_baselines, folder=False),
    Step("data1", ("runs", "banks", "data1", "allow_unisolated", "format"), _run_data1, Stage1DataConfig, _wire_data1,
         after=("baselines",)),
    Step("stage1", ("stage1", "threads"), _run_stage1, Stage1Config, _wire_stage1, after=("data1",)),
    Step("data2", ("suite", "data2", "allow_unisolated", "format"), _run_data2, Stage2DataConfig, _wire_data2,
         after=("data1",)),
    Step("stage2", ("stage2", "threads", "format"), _run_stage2, Stage2Config, _wire_stage2,
         after=("data2", "stage1")),
    Step("stage3", ("suite", "executor", "stage3", "threads", "data1", "format"), _run_stage3, Stage3Config,
         _wire_stage3, after=("stage1", "stage2")),
    Step("validity", (*_EVAL, "repair_rounds", "eval_max_new_tokens", "eval_smoke_steps", "format"), _run_validity,
         more=_eval_inputs, after=_POLICIES),
    Step("streaming", (*_EVAL, "eval_options", "format"), _run_streaming, more=_eval_inputs, after=_POLICIES),
    Step("figures", ("compare_runs",), _run_figures, folder=False),
)
STEP_TABLE = {s.name: s for s in PIPELINE}
STEPS = tuple(STEP_TABLE)


def check_stages(cfg: PipelineConfig, out: str | Path) -> None:
    """Build every stage's config (and check the option mappings' keys and that each of ``compare_runs`` is a run on
    ``suite`` and ``eval_split``) before any step runs, so a typo in a later stage's mapping fails at once, naming the
    stage and the key, instead of hours in."""
    from dataclasses import fields

    out = Path(out)
    for step in PIPELINE:
        if step.stage is not None:
            _stage(step.stage, getattr(cfg, step.name), step.wiring(cfg, out), step.name)
    for key, cls in (("baseline_options", RunConfig), ("eval_options", JITConfig)):
        unknown = sorted(set(getattr(cfg, key)) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"pipeline config, {key}: unknown key(s) {', '.join(unknown)}; known: "
                              f"{', '.join(f.name for f in fields(cls))}")
    for run in cfg.compare_runs:
        summary = Path(run) / "summary.json"
        where = json.loads(summary.read_text()) if summary.is_file() else {}
        if (where.get("suite"), where.get("split")) != (cfg.suite, cfg.eval_split) and not _same_stream(where, cfg):
            found = f"a {where.get('suite')} {where.get('split')} run" if where else "no run (no summary.json)"
            raise ConfigError(f"pipeline config, compare_runs: {run} is {found}; give runs on {cfg.suite} "
                              f"{cfg.eval_split} (run directories or exports, paths from the working directory)")


def _same_stream(summary: dict, cfg: PipelineConfig) -> bool:
    """Whether a run on another suite spelling played the first tasks of ``cfg.suite``'s ``eval_split`` in their
    order: a mix spec that adds a train split to a test stream's spec (jitlab/envs/mix.py) names the same stream."""
    played = [row.get("task_id") for row in summary.get("per_task") or []]
    if not played or summary.get("split") != cfg.eval_split:
        return False
    tasks = [t.id for t in get_suite(cfg.suite).tasks(cfg.eval_split)]
    return played == tasks[:len(played)]


def _phases(manifest: dict) -> dict:
    return {"phases": manifest["phases"], "adapter": manifest.get("adapter")}


def _manifest(out: Path) -> dict:
    path = out / "pipeline.json"
    return json.loads(path.read_text()) if path.is_file() else {"steps": {}}


def _done(out: Path, name: str) -> dict:
    step = _manifest(out)["steps"].get(name)
    if not step or step.get("status") != "done":
        raise ConfigError(f"{out}: step {name} has not run; run it first (or give runs: in the pipeline config)")
    return step


def run_steps(cfg: PipelineConfig, out: str | Path, steps=STEPS, echo=None) -> dict:
    """Run ``steps`` (names of ``STEPS``) into ``out``, skipping those already done with the same inputs; returns the
    manifest (``out/pipeline.json``: per step its inputs, outputs, wall_s; ``total_wall_s`` over the steps run)."""
    out = Path(out)
    for name in steps:
        if name not in STEPS:
            raise ConfigError(f"unknown pipeline step {name!r}; steps: {', '.join(STEPS)}")
    check_stages(cfg, out)   # before anything is written
    with sole_writer(out, f"pipeline folder {out}"):   # one pipeline per folder
        manifest = _manifest(out)
        manifest["config"] = asdict(cfg)
        for name in [s for s in STEPS if s in steps]:
            before = manifest["steps"].get(name) or {}
            stale = _stale(manifest, out, name)
            if name != "figures" and before.get("status") == "done" and not stale and \
                    before.get("fingerprint") == _fingerprint(cfg, out, name):      # figures: cheap, always redrawn
                if echo:
                    echo(f"{name}: done ({before['wall_s']} s), skipped")
                continue
            if echo:
                echo(f"{name}: running" + (f" again: {stale}" if stale and before.get("status") == "done" else ""))
            start = time.perf_counter()
            manifest["steps"][name] = {"status": "running"}
            write_json(out / "pipeline.json", manifest)
            try:
                inputs, outputs = STEP_TABLE[name].run(cfg, out)
            except ConfigDrift:   # its folder holds a run of other inputs (a stage or run refuses it before writing)
                if not (out / name).is_dir():
                    raise
                aside = set_aside(out / name, REPLACED)
                if echo:
                    echo(f"{name}: {out / name} held a run with other inputs, kept as {aside}; starting over")
                inputs, outputs = STEP_TABLE[name].run(cfg, out)
            manifest["seq"] = manifest.get("seq", 0) + 1
            manifest["steps"][name] = {"status": "done", "fingerprint": _fingerprint(cfg, out, name), "inputs": inputs,
                                       "outputs": outputs, "wall_s": round(time.perf_counter() - start, 2),
                                       "seq": manifest["seq"]}
            manifest["total_wall_s"] = round(sum(s.get("wall_s", 0) for s in manifest["steps"].values()), 2)
            write_json(out / "pipeline.json", manifest)
            if echo:
                echo(f"{name}: done in {manifest['steps'][name]['wall_s']} s")
        return manifest


def _stale(manifest: dict, out: Path, name: str) -> str | None:
    """Why step ``name``'s finished record no longer holds, or None: its folder is gone, or a step it reads from
    finished after it (``seq``: the order steps finished in; a record from before ``seq`` counts as older)."""
    step, steps = STEP_TABLE[name], manifest["steps"]
    if step.folder and not (out / name).is_dir():
        return f"{out / name} is missing"
    own = (steps.get(name) or {}).get("seq", 0)
    newer = [d for d in step.after if (steps.get(d) or {}).get("seq", 0) > own]
    return f"{', '.join(newer)} ran after it" if newer else None


def _fingerprint(cfg: PipelineConfig, out: Path, name: str) -> dict:
    """What a finished step depends on (its ``reads`` and ``more`` in PIPELINE): a change reruns it."""
    step, c = STEP_TABLE[name], asdict(cfg)
    fp = {k: c[k] for k in step.reads} | (step.more(cfg, out) if step.more else {})
    return json.loads(json.dumps(fp, default=str))


def pipeline_run(config: str | Path, out: str | Path) -> tuple[PipelineConfig, Path]:
    """A pipeline run as `jitlab train pipeline --config C --out D` made it from the repository root: its config and
    its folder as that command named it (relative when inside the checkout), so ``run_steps`` finds the finished
    steps' records unchanged and skips them. Changes the working directory to the repository root (the config's
    ``compare_runs`` and the records' paths are relative to it); the notebooks 02-04 call it."""
    out = Path(out).absolute()
    os.chdir(repo_root())
    rel = os.path.relpath(out)
    return load_config(PipelineConfig, config), out if rel.startswith("..") else Path(rel)


def stage_overrides(path: str | Path | None = None, **values) -> dict:
    """A stage's overrides for PipelineConfig (``stage1=...``): the YAML mapping at ``path`` (e.g. a GPU profile),
    then ``values`` that are not None (a notebook's parameters)."""
    import yaml
    data = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except FileNotFoundError:
            raise ConfigError(f"stage config {path}: no such file") from None
        if not isinstance(data, dict):
            raise ConfigError(f"stage config {path} must be a YAML mapping of the stage's config fields")
    return {**data, **{k: v for k, v in values.items() if v is not None}}


def read_manifest(folder: str | Path) -> dict:
    """``folder/manifest.json`` (a data folder or a stage run)."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"{folder}: no manifest.json; run that step first")
    return json.loads(path.read_text())


def repair_before(cfg: PipelineConfig, out: str | Path) -> dict:
    """Stage II's *before*: the policy Stage II started from (its Stage I adapter, or the base) on the same held-out
    faults with the run's evaluation settings (jitlab.train.stage2.evaluate_repair) -> ``stage2/eval-before/``."""
    out = Path(out)
    run = read_manifest(out / "stage2")
    c = run["config"]
    policy = f"hf:{c['stage1']}" if c.get("stage1") else run["base"]
    target = out / "stage2" / "eval-before"
    done = target / "summary.json"
    if done.is_file():
        summary = json.loads(done.read_text())
        if (summary.get("backbone"), summary.get("rounds"), summary.get("limit")) == (policy, c["eval_rounds"],
                                                                                        c["eval_limit"]):
            return summary
    return evaluate_repair(policy, c["data"], target, c["formats"], rounds=c["eval_rounds"], limit=c["eval_limit"],
                           executor=c["eval_executor"], allow_unisolated=c["allow_unisolated"])


def run_pipeline(cfg: PipelineConfig, out: str | Path, echo=print) -> dict:
    """Every step of ``STEPS`` (resumable; see the module docstring)."""
    return run_steps(cfg, out, STEPS, echo)
