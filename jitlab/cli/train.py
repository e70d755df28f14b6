"""``jitlab train``: build training data and train the meta-agent (jitlab.train). Heavy imports (torch, TRL) happen
inside the commands, so ``jitlab --help`` stays fast.

    jitlab train data stage1 --runs runs/grid/* --bank runs/jit-tw/bank.sqlite --out runs/train/data1
    jitlab train data stage2 --set stage1_data=runs/train/data1 --out runs/train/data2
    jitlab train stage1 --config jitlab/train/configs/gpu/stage1.yaml --set data=runs/train/data1 --out runs/train/s1
    jitlab train stage1 --set data=runs/train/data1 --set sft_steps=20 --out runs/train/s1     # CPU defaults
    jitlab train stage2 --set data=runs/train/data2 --set stage1=runs/train/s1/adapter --out runs/train/s2
    jitlab train stage3 --set policy=runs/train/s2/adapter --set suite=textworld --out runs/train/s3
    jitlab train engineer data --set loops=[runs/eng] --out runs/train/eng-data      # the engineer (issue 13)
    jitlab train engineer sft --set data=runs/train/eng-data --out runs/train/eng-sft
    jitlab train engineer grpo --set data=runs/train/eng-data --set policy=runs/train/eng-sft/adapter --out runs/train/eng-grpo
    jitlab train pipeline --config jitlab/train/configs/pipeline.yaml --out runs/pipeline/textworld  # all of it (make pipeline)

Rerunning the same ``stage1`` command resumes it (finished phases are skipped, a killed one restarts from its newest
checkpoint). ``--set KEY=VALUE`` (repeatable, YAML values) overrides the config file's fields.
"""
from __future__ import annotations

import json

from jitlab.cli.options import key_values

__all__ = ["add_train_commands", "cmd_engineer_data", "cmd_engineer_grpo", "cmd_engineer_sft", "cmd_train_data",
           "cmd_train_data2", "cmd_train_pipeline", "cmd_train_stage1", "cmd_train_stage2", "cmd_train_stage3"]


def _overrides(items) -> dict:
    return dict(key_values(items, "--set"))


def cmd_train_data(args) -> int:
    from jitlab.train.config import Stage1DataConfig, load_config
    from jitlab.train.data import build_stage1
    overrides = _overrides(args.set)
    values = {"runs": args.runs or None, "banks": args.bank or None}
    cfg = load_config(Stage1DataConfig, args.config, overrides, **values)
    manifest = build_stage1(cfg, args.out)
    print(f"{args.out}: {json.dumps(manifest['counts'])}\n  dropped: {json.dumps(manifest['dropped'])}")
    return 0


def cmd_train_data2(args) -> int:
    from jitlab.train.config import Stage2DataConfig, load_config
    from jitlab.train.repair_data import build_stage2
    manifest = build_stage2(load_config(Stage2DataConfig, args.config, _overrides(args.set)), args.out)
    print(f"{args.out}: {manifest['counts']['examples']} repair examples "
          f"({manifest['counts']['kind_mismatches']} with another diagnostic kind than intended)\n"
          f"  dropped: {json.dumps(manifest['dropped'])}")
    return 0


def cmd_train_stage1(args) -> int:
    from jitlab.train.config import Stage1Config, load_config
    from jitlab.train.stage1 import run_stage1
    cfg = load_config(Stage1Config, args.config, _overrides(args.set))
    print(f"jitlab train stage1: {cfg.base} on {cfg.data} -> {args.out}", flush=True)
    manifest = run_stage1(cfg, args.out)
    for name, phase in manifest["phases"].items():
        _print_phase(name, phase)
    print(f"adapter: {args.out}/adapter   (use as hf:{args.out}/adapter or plan:hf:{args.out}/adapter)")
    return 0


def _print_phase(name: str, phase: dict) -> None:
    if phase.get("skipped"):
        print(f"  {name}: skipped ({phase['skipped']})")
    else:
        print(f"  {name}: {phase['global_step']} steps on {phase['examples']} examples, loss "
              f"{phase['first_loss']} -> {phase['last_loss']}, {phase['wall_s']} s"
              + (f" (resumed from {phase['resumed_from']})" if phase.get("resumed_from") else ""))


def cmd_train_stage2(args) -> int:
    from jitlab.train.config import Stage2Config, load_config
    from jitlab.train.stage2 import run_stage2
    cfg = load_config(Stage2Config, args.config, _overrides(args.set))
    print(f"jitlab train stage2: {cfg.stage1 or cfg.base} on {cfg.data} -> {args.out}", flush=True)
    manifest = run_stage2(cfg, args.out)
    _print_phase("sft", manifest["phases"]["sft"])
    if manifest.get("eval"):
        ev = manifest["eval"]
        print(f"  held-out repair within {ev['rounds']} rounds: {ev['repaired']}/{ev['n']} "
              f"({json.dumps(ev['by_format'])}); records in {args.out}/eval/")
    print(f"adapter: {args.out}/adapter   (use as plan:hf:{args.out}/adapter or code:hf:{args.out}/adapter)")
    return 0


def cmd_train_stage3(args) -> int:
    from jitlab.train.config import Stage3Config, load_config
    from jitlab.train.stage3 import run_stage3
    cfg = load_config(Stage3Config, args.config, _overrides(args.set))
    print(f"jitlab train stage3: {cfg.policy or cfg.base} on {cfg.suite} {cfg.split}, executor {cfg.executor} -> "
          f"{args.out}", flush=True)
    manifest = run_stage3(cfg, args.out)
    _print_phase("grpo", manifest["phases"]["grpo"])
    print(f"  candidates: {json.dumps(manifest['summary'])}")
    print(f"adapter: {args.out}/adapter   (use as plan:hf:{args.out}/adapter); bank: {args.out}/bank.sqlite")
    return 0


def cmd_engineer_data(args) -> int:
    from jitlab.train.config import EngineerDataConfig, load_config
    from jitlab.train.engineer import build_engineer_data
    manifest = build_engineer_data(load_config(EngineerDataConfig, args.config, _overrides(args.set)), args.out)
    print(f"{args.out}: {json.dumps(manifest['counts'])}\n  dropped: {json.dumps(manifest['dropped'])}")
    return 0


def cmd_engineer_sft(args) -> int:
    from jitlab.train.config import EngineerSFTConfig, load_config
    from jitlab.train.engineer import run_engineer_sft
    cfg = load_config(EngineerSFTConfig, args.config, _overrides(args.set))
    print(f"jitlab train engineer sft: {cfg.base} on {cfg.data} -> {args.out}", flush=True)
    _print_phase("sft", run_engineer_sft(cfg, args.out)["phases"]["sft"])
    print(f"adapter: {args.out}/adapter   (use as jitlab engineer run --engineer hf:{args.out}/adapter)")
    return 0


def cmd_engineer_grpo(args) -> int:
    from jitlab.train.config import EngineerGRPOConfig, load_config
    from jitlab.train.engineer import run_engineer_grpo
    cfg = load_config(EngineerGRPOConfig, args.config, _overrides(args.set))
    print(f"jitlab train engineer grpo: {cfg.policy or cfg.base} on {cfg.data} -> {args.out}", flush=True)
    manifest = run_engineer_grpo(cfg, args.out)
    _print_phase("grpo", manifest["phases"]["grpo"])
    print(f"  patches: {json.dumps(manifest['summary'])}")
    print(f"adapter: {args.out}/adapter   (use as jitlab engineer run --engineer hf:{args.out}/adapter)")
    return 0


def cmd_train_pipeline(args) -> int:
    from jitlab.train.config import load_config
    from jitlab.train.pipeline import STEPS, PipelineConfig, run_steps
    cfg = load_config(PipelineConfig, args.config, _overrides(args.set))
    from jitlab.train.report import closing_table, paired_table
    from jitlab.viz.tables import markdown_table
    manifest = run_steps(cfg, args.out, args.steps or STEPS, echo=lambda line: print(f"  {line}", flush=True))
    for table in (closing_table(args.out, cfg.compare_runs), paired_table(args.out, cfg.compare_runs)):
        if not table.empty:   # untrained vs each stage (and the compare runs), each row's n; then the paired tests
            print(markdown_table(table.dropna(axis=1, how="all"), empty="-"))
    print(f"{args.out}/pipeline.json: {len(manifest['steps'])} steps, {manifest.get('total_wall_s')} s in all; "
          f"figures in {args.out}/figures/")
    return 0


def _config_command(sub, name: str, help: str, config: str, out_help: str, func, data: bool = False):
    """A ``train`` subcommand configured by ``--config`` YAML of ``config``'s fields plus ``--set`` overrides."""
    s = sub.add_parser(name, help=help)
    s.add_argument("--config", help=f"YAML of {config} fields" + ("" if data else " (default: the CPU profile)"))
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)")
    s.add_argument("--out", required=True, help=out_help)
    s.set_defaults(func=func)
    return s


def add_train_commands(sub) -> None:
    """Register ``jitlab train`` on the ``jitlab`` parser's subparsers."""
    p = sub.add_parser("train", help="build training data and train the meta-agent (TRL + peft)")
    tsub = p.add_subparsers(dest="train_command", required=True)
    d = tsub.add_parser("data", help="build a stage's training data from recorded runs and banks")
    dsub = d.add_subparsers(dest="data_stage", required=True)
    s = _config_command(dsub, "stage1", "Stage I: each dev task's best valid plan (SFT) and Pareto pairs (DPO)",
                        "Stage1DataConfig", "folder for sft.jsonl, pairs.jsonl, manifest.json", cmd_train_data, data=True)
    s.add_argument("--runs", nargs="+", metavar="RUN_DIR", help="run directories (jitlab run / jit)")
    s.add_argument("--bank", nargs="+", metavar="BANK", help="bank.sqlite files whose evaluations count too")
    _config_command(dsub, "stage2", "Stage II: faults injected into valid harnesses, with their known fix",
                    "Stage2DataConfig", "folder for repairs.jsonl, manifest.json", cmd_train_data2,
                    data=True)
    resume = "run folder (rerun the same command to resume)"
    p = _config_command(tsub, "pipeline", "the whole pipeline: seed baselines -> Stage I data -> I -> Stage II data "
                        "-> II -> III -> held-out validity and streaming JIT evaluation -> figures (resumable)",
                        "PipelineConfig", "pipeline folder (rerun to resume: finished steps are skipped)",
                        cmd_train_pipeline)
    p.add_argument("--steps", nargs="+", metavar="STEP", help="only these steps (default: all, in order)")
    _config_command(tsub, "stage1", "Stage I: SFT then DPO, LoRA adapter loadable as hf:<out>/adapter (resumable)",
                    "Stage1Config", resume, cmd_train_stage1)
    _config_command(tsub, "stage2", "Stage II: SFT on repair transitions (on a Stage I adapter), held-out repair "
                    "evaluation (resumable)", "Stage2Config", resume, cmd_train_stage2)
    _config_command(tsub, "stage3", "Stage III (Evo-GDPO): GRPO with gated reward channels, candidates run in the "
                    "sandbox against the family's incumbent, conservative bank update (resumable)",
                    "Stage3Config", resume, cmd_train_stage3)
    e = tsub.add_parser("engineer", help="train the harness engineer (issue 13): data from engineer loops, cold-start "
                                         "SFT, GRPO with Δ success as the reward (resumable)")
    esub = e.add_subparsers(dest="engineer_stage", required=True)
    _config_command(esub, "data", "engineer-loop folders -> (packet -> patch) SFT examples of valid, non-regressive "
                    "patches and the GRPO packets", "EngineerDataConfig", "folder for sft.jsonl, packets.jsonl, "
                    "manifest.json", cmd_engineer_data, data=True)
    _config_command(esub, "sft", "cold-start SFT on (packet -> patch), adapter usable as --engineer hf:<out>/adapter",
                    "EngineerSFTConfig", resume, cmd_engineer_sft)
    _config_command(esub, "grpo", "GRPO over K sampled patches per packet, reward = Δ success re-run in the sandbox",
                    "EngineerGRPOConfig", resume, cmd_engineer_grpo)
