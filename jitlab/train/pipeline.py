"""The whole training pipeline as one resumable command, and the steps the stage notebooks (02-04) call.

    jitlab train pipeline --config jitlab/train/configs/pipeline.yaml --out runs/pipeline     # make pipeline
    from jitlab.train.pipeline import PipelineConfig, run_pipeline, run_steps
    run_steps(cfg, out, ["baselines", "data1", "stage1", "validity"])                      # notebook 02

Steps (``STEPS``, in order; each writes under ``out``):

    baselines  seed harnesses on ``baseline_limit`` dev tasks with ``executor`` (jitlab.experiments.run_grid):
               the offline teacher's evidence -> baselines/<suite>/<seed>-<executor>/. Skipped when ``runs`` is given.
    data1      Stage I data (jitlab.train.data.build_stage1) from those runs and ``banks`` -> data1/
    stage1     SFT then DPO (jitlab.train.stage1) -> stage1/adapter
    data2      Stage II data (jitlab.train.repair_data.build_stage2), data1's plans as inputs too -> data2/
    stage2     repair SFT on the Stage I adapter, held-out repair evaluation (jitlab.train.stage2) -> stage2/
    stage3     Evo-GDPO (jitlab.train.stage3), from the newest adapter, candidates run with ``executor`` -> stage3/
    validity   per policy of ``eval_policies`` (base = the untrained ``plan:<base>``, stageN = ``plan:hf:<stageN
               adapter>``): one plan per task on ``eval_limit`` held-out tasks (jitlab.train.evaluate): parse rate,
               first-try validity, repair success within ``repair_rounds`` rounds -> validity/<policy>/summary.json
    streaming  streaming JIT of each policy on the same test tasks (success, tokens per task per phase)
               -> streaming/<policy>/
    figures    training curves (from TRL's TensorBoard logs), Stage III reward channels, the evaluation table
               -> figures/ (PNG, PDF, HTML, README.md)

Every stage's own config is the stage dataclass (jitlab.train.config) with the pipeline's wiring (data folders,
adapters, suite) and the YAML mapping given under the stage's key (``stage1: {sft_steps: 20}``). ``pipeline.json``
records each step's inputs, outputs and wall time; a rerun skips a finished step whose inputs are unchanged (the
stages themselves resume a killed training from its last checkpoint). Caveat: a step rerun with changed inputs
into an existing stage folder is refused by that stage (ConfigDrift): choose a new --out.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.fields import check_fields
from jitlab.train.config import FORMATS, Stage1DataConfig, check_format
from jitlab.train.records import write_json

__all__ = ["POLICIES", "STEPS", "PipelineConfig", "code_references", "evaluate_policies", "k_references",
           "policy_backbones", "read_manifest", "repair_before", "run_pipeline", "run_steps", "stage_overrides"]

STEPS = ("baselines", "data1", "stage1", "data2", "stage2", "stage3", "validity", "streaming", "figures")
POLICIES = ("base", "stage1", "stage2", "stage3")


@dataclass
class PipelineConfig:
    """Seed baselines -> Stage I data -> Stage I -> Stage II data -> Stage II -> Stage III -> evaluations -> figures."""
    suite: str = field(default="textworld", metadata={"help": "suite the data, Stage III and the evaluations use",
                                                      "nonempty": True})
    format: str = field(default="plan", metadata={"help": "what the student writes: plans (plan:<backbone>) or "
                                                          "harness files (code:<backbone>)", "choices": FORMATS})
    executor: str = field(default="embedded", metadata={"help": "frozen backbone that runs every episode (baselines, "
                                                                "Stage III candidates, evaluations)", "nonempty": True})
    seeds: list = field(default_factory=list, metadata={"help": "seed harnesses of the baseline grid (default: all "
                                                                "seeds, baselines excluded)"})
    baseline_limit: int = field(default=5, metadata={"help": "dev tasks per seed baseline", "min": 1})
    baseline_options: dict = field(default_factory=dict, metadata={"help": "RunConfig fields of the baselines, e.g. "
                                                                           "{max_steps: 10}"})
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
    eval_split: str = field(default="test", metadata={"help": "split of the held-out evaluation tasks",
                                                      "choices": ["dev", "test"]})
    eval_limit: int = field(default=10, metadata={"help": "held-out tasks per evaluation", "min": 1})
    repair_rounds: int = field(default=2, metadata={"help": "repair rounds allowed in the validity evaluation",
                                                    "min": 0})
    eval_max_new_tokens: int = field(default=160, metadata={"help": "tokens per plan (and repaired plan) in the "
                                                                    "validity evaluation", "min": 8})
    eval_smoke_steps: int = field(default=2, metadata={"help": "validation smoke steps in the validity evaluation",
                                                       "min": 0})
    eval_concurrency: int = field(default=1, metadata={"help": "held-out tasks of the validity evaluation run at once "
                                                               "(their calls batch in the hf engine)", "min": 1})
    eval_options: dict = field(default_factory=dict, metadata={"help": "JITConfig fields of the evaluations, e.g. "
                                                                       "{max_steps: 10, retrieval: bm25}"})
    allow_unisolated: bool = field(default=False, metadata={"help": "run harnesses without bubblewrap when it is "
                                                                    "unavailable (recorded)"})
    threads: int | None = field(default=None, metadata={"help": "torch CPU threads of every training stage", "min": 1})

    def __post_init__(self):
        check_fields(self)
        check_format(self.format)
        bad = sorted(set(self.eval_policies) - set(POLICIES))
        if bad:
            raise ConfigError(f"eval_policies: unknown {', '.join(bad)}; use {', '.join(POLICIES)}")


def _stage(cls, overrides: dict, wiring: dict, key: str):
    """``cls`` from the pipeline's wiring, then the user's mapping under ``key`` (which wins); unknown keys are
    one-line ConfigErrors naming the key."""
    from jitlab.train.config import load_config
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


def evaluate_policies(cfg: PipelineConfig, out: str | Path, mode: str = "validity", policies=None) -> dict:
    """Each policy (default: ``policy_backbones``) on the held-out tasks -> ``out/<mode>/<policy>/``; returns
    {policy: summary}. ``validity``: jitlab.train.evaluate.evaluate_generator (parse rate, first-try validity, repair
    success within ``repair_rounds``); ``streaming``: a streaming JIT run of ``plan:<backbone>`` with ``executor``."""
    out = Path(out)
    result = {}
    for policy, backbone in (policies or policy_backbones(cfg, out)).items():
        if mode == "validity":
            from jitlab.train.evaluate import evaluate_generator
            result[policy] = evaluate_generator(
                backbone, out / mode / policy, suite=cfg.suite, split=cfg.eval_split, limit=cfg.eval_limit,
                rounds=cfg.repair_rounds, max_new_tokens=cfg.eval_max_new_tokens, executor=cfg.executor,
                smoke_steps=cfg.eval_smoke_steps, allow_unisolated=cfg.allow_unisolated, k_references=k_references(cfg),
                format=cfg.format, code_references=code_references(cfg), concurrency=cfg.eval_concurrency)
        else:
            from jitlab.jit.inference import JITConfig, run_jit
            from jitlab.train.report import EVAL_COLUMNS
            jit = JITConfig(suite=cfg.suite, mode="streaming", generator=f"{cfg.format}:{backbone}", backbone=cfg.executor,
                            split=cfg.eval_split, limit=cfg.eval_limit, out=str(out / mode / policy),
                            **{"allow_unisolated": cfg.allow_unisolated, "quiet": True,
                               "k_references": max(1, k_references(cfg)), **cfg.eval_options})
            summary = json.loads((run_jit(jit) / "summary.json").read_text())
            result[policy] = {k: summary.get(k) for k in EVAL_COLUMNS[1:]}
    return result


def _step(name: str, cfg: PipelineConfig, out: Path) -> tuple[dict, dict]:
    """(inputs, outputs) of step ``name``; runs it."""
    from jitlab.train import config as C
    common = {"allow_unisolated": cfg.allow_unisolated}
    train = {"threads": cfg.threads} if cfg.threads else {}
    if name == "baselines":
        from jitlab.experiments import run_grid, seed_harnesses
        seeds = cfg.seeds or seed_harnesses()
        inputs = {"seeds": seeds, "executor": cfg.executor, "limit": cfg.baseline_limit, **cfg.baseline_options}
        if cfg.runs:
            return {"runs": cfg.runs}, {"skipped": "runs given", "runs": cfg.runs}
        rows = run_grid(cfg.suite, seeds, cfg.executor, limit=cfg.baseline_limit, out_root=out / "baselines",
                        split="dev", allow_unisolated=cfg.allow_unisolated, **cfg.baseline_options)
        return inputs, {"runs": list(rows["run_dir"]), "success_rate": dict(zip(rows["harness"], rows["success_rate"]))}
    if name == "data1":
        from jitlab.train.data import build_stage1
        runs = cfg.runs or _done(out, "baselines")["outputs"]["runs"]
        data = _stage(C.Stage1DataConfig, cfg.data1, {"runs": runs, "banks": cfg.banks, "format": cfg.format,
                                                       **common}, "data1")
        return asdict(data), {"counts": build_stage1(data, out / "data1")["counts"]}
    if name == "stage1":
        from jitlab.train.stage1 import run_stage1
        s1 = _stage(C.Stage1Config, cfg.stage1, {"data": str(out / "data1"), **train}, "stage1")
        return asdict(s1), _phases(run_stage1(s1, out / "stage1"))
    if name == "data2":
        from jitlab.train.repair_data import build_stage2
        wiring = {"suite": cfg.suite, "formats": [cfg.format], **common}
        if (out / "data1" / "sft.jsonl").is_file():
            wiring["stage1_data"] = str(out / "data1")
        data = _stage(C.Stage2DataConfig, cfg.data2, wiring, "data2")
        return asdict(data), {"counts": build_stage2(data, out / "data2")["counts"]}
    if name == "stage2":
        from jitlab.train.stage2 import run_stage2
        wiring = {"data": str(out / "data2"), "stage1": _adapter(out, "stage1"), "formats": [cfg.format], **common,
                  **train}
        s2 = _stage(C.Stage2Config, cfg.stage2, wiring, "stage2")
        manifest = run_stage2(s2, out / "stage2")
        return asdict(s2), {**_phases(manifest), "eval": manifest.get("eval")}
    if name == "stage3":
        from jitlab.train.stage3 import run_stage3
        wiring = {"suite": cfg.suite, "executor": cfg.executor, "policy": _adapter(out, "stage2", "stage1"),
                  "k_references": k_references(cfg), "format": cfg.format, "code_references": code_references(cfg),
                  **common, **train}
        s3 = _stage(C.Stage3Config, cfg.stage3, wiring, "stage3")
        manifest = run_stage3(s3, out / "stage3")
        return asdict(s3), {**_phases(manifest), "summary": manifest["summary"]}
    if name in ("validity", "streaming"):
        return _fingerprint(cfg, out, name), evaluate_policies(cfg, out, name)
    if name == "figures":
        from jitlab.train.report import pipeline_figures
        return {"steps": sorted(_manifest(out)["steps"])}, {"files": pipeline_figures(out)}
    raise ConfigError(f"unknown pipeline step {name!r}; steps: {', '.join(STEPS)}")


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
    out.mkdir(parents=True, exist_ok=True)
    manifest = _manifest(out)
    manifest["config"] = asdict(cfg)
    for name in steps:
        if name not in STEPS:
            raise ConfigError(f"unknown pipeline step {name!r}; steps: {', '.join(STEPS)}")
    for name in [s for s in STEPS if s in steps]:
        before = manifest["steps"].get(name) or {}
        if name != "figures" and before.get("status") == "done" and \
                before.get("fingerprint") == _fingerprint(cfg, out, name):      # figures: cheap, always redrawn
            if echo:
                echo(f"{name}: done ({before['wall_s']} s), skipped")
            continue
        if echo:
            echo(f"{name}: running")
        start = time.perf_counter()
        manifest["steps"][name] = {"status": "running"}
        write_json(out / "pipeline.json", manifest)
        inputs, outputs = _step(name, cfg, out)
        manifest["steps"][name] = {"status": "done", "fingerprint": _fingerprint(cfg, out, name), "inputs": inputs,
                                   "outputs": outputs, "wall_s": round(time.perf_counter() - start, 2)}
        manifest["total_wall_s"] = round(sum(s.get("wall_s", 0) for s in manifest["steps"].values()), 2)
        write_json(out / "pipeline.json", manifest)
        if echo:
            echo(f"{name}: done in {manifest['steps'][name]['wall_s']} s")
    return manifest


def _fingerprint(cfg: PipelineConfig, out: Path, name: str) -> dict:
    """What a finished step depends on: the config fields it reads (a change reruns it)."""
    c = asdict(cfg)
    keys = {"baselines": ["suite", "executor", "seeds", "baseline_limit", "baseline_options", "runs"],
            "data1": ["runs", "banks", "data1", "allow_unisolated", "format"], "stage1": ["stage1", "threads"],
            "data2": ["suite", "data2", "allow_unisolated", "format"], "stage2": ["stage2", "threads", "format"],
            "stage3": ["suite", "executor", "stage3", "threads", "data1", "format"],
            "validity": ["suite", "executor", "eval_policies", "eval_split", "eval_limit", "repair_rounds",
                         "eval_max_new_tokens", "eval_smoke_steps", "format"],
            "streaming": ["suite", "executor", "eval_policies", "eval_split", "eval_limit", "eval_options", "format"],
            "figures": []}[name]
    fp = {k: c[k] for k in keys}
    if name in ("validity", "streaming"):
        fp["backbones"] = policy_backbones(cfg, out)
        fp["k_references"], fp["code_references"] = k_references(cfg), code_references(cfg)
    return json.loads(json.dumps(fp, default=str))


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
    from jitlab.train.stage2 import evaluate_repair
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
