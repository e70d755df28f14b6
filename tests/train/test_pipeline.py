"""jitlab train pipeline: config checks, resumable steps (a rerun skips finished steps; a changed step reruns), the
manifest's wall times; the whole pipeline end to end in smoke form (slow: toy suite, scripted executors as test
doubles, one optimizer step per phase on the embedded SmolLM2-135M)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jitlab.errors import ConfigError
from jitlab.train.config import CONFIG_DIR, Stage1Config, load_config
from jitlab.train.pipeline import STEPS, PipelineConfig, run_steps

REPO = Path(__file__).resolve().parents[2]
TOY = {"suite": "toy", "executor": "scripted:pick-first", "seeds": ["react", "resum"], "baseline_limit": 2,
       "baseline_options": {"max_steps": 4}, "data1": {"k_references": 0}}


def test_config_checks_and_shipped_configs():
    with pytest.raises(ConfigError, match="--format must be plan or code"):
        PipelineConfig(format="json")
    with pytest.raises(ConfigError, match="eval_policies: unknown stage9"):
        PipelineConfig(eval_policies=["base", "stage9"])
    with pytest.raises(ConfigError, match="unknown pipeline step 'stage4'"):
        run_steps(PipelineConfig(), "/nonexistent", ["stage4"])
    from jitlab.train.pipeline import _stage
    with pytest.raises(ConfigError, match="pipeline config, stage1: .*unknown key.*sft_stepz"):
        _stage(Stage1Config, {"sft_stepz": 2}, {"data": "d"}, "stage1")
    names = ("pipeline.yaml", "pipeline-babyai.yaml", "pipeline-dbbench.yaml", "pipeline-mix.yaml", "pipeline-code.yaml",
             "pipeline-smoke.yaml")
    assert sorted(names) == sorted(p.name for p in CONFIG_DIR.glob("pipeline*.yaml"))
    for name in names:
        cfg = load_config(PipelineConfig, CONFIG_DIR / name)
        assert _stage(Stage1Config, cfg.stage1, {"data": "d"}, "stage1").sft_steps >= 1, name
        # the executor is in the steps' fingerprints: named in the file, a moved code default reruns nothing
        assert "executor" in yaml.safe_load((CONFIG_DIR / name).read_text()), name


def test_a_rerun_skips_finished_steps_and_a_changed_step_reruns(tmp_path):
    lines = []
    cfg = PipelineConfig(**TOY)
    first = run_steps(cfg, tmp_path, ["baselines", "data1"], echo=lines.append)
    steps = first["steps"]
    assert [steps[s]["status"] for s in ("baselines", "data1")] == ["done", "done"]
    assert len(steps["baselines"]["outputs"]["runs"]) == 2 and steps["data1"]["outputs"]["counts"]["sft"] >= 1
    assert first["total_wall_s"] == pytest.approx(steps["baselines"]["wall_s"] + steps["data1"]["wall_s"], abs=0.02)
    lines.clear()
    again = run_steps(cfg, tmp_path, ["baselines", "data1"], echo=lines.append)
    assert lines == [f"baselines: done ({steps['baselines']['wall_s']} s), skipped",
                     f"data1: done ({steps['data1']['wall_s']} s), skipped"]
    assert again["steps"] == steps
    lines.clear()
    run_steps(PipelineConfig(**{**TOY, "data1": {"k_references": 0, "max_pairs_per_task": 1}}), tmp_path,
              ["baselines", "data1"], echo=lines.append)
    assert lines[0].endswith("skipped") and lines[1] == "data1: running"
    on_disk = json.loads((tmp_path / "pipeline.json").read_text())
    assert on_disk["steps"]["data1"]["inputs"]["max_pairs_per_task"] == 1


def test_a_second_process_writing_the_same_pipeline_or_evaluation_folder_is_refused_naming_the_first(tmp_path):
    """Also a standalone stage (``jitlab train stage1 --out``), data builder or engineer loop on a held folder."""
    from jitlab.engineer.loop import EngineerConfig, run_engineer
    from jitlab.errors import RunLocked
    from jitlab.store import sole_writer
    from jitlab.train.config import Stage1DataConfig
    from jitlab.train.data import build_stage1
    from jitlab.train.evaluate import evaluate_generator
    from jitlab.train.stage1 import run_stage1
    out = tmp_path / "o"
    hold = "import sys, time\nfrom jitlab.store import sole_writer\nwith sole_writer(sys.argv[1], 'x'):\n" \
           "    print('held', flush=True)\n    time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=rf"pipeline folder {out} is being written by another process "
                                            rf"\(PID {holder.pid};"):
            run_steps(PipelineConfig(**TOY), out, ["baselines"])
        with pytest.raises(RunLocked, match=rf"evaluation folder {out} is being written .*PID {holder.pid}"):
            evaluate_generator("scripted:pick-first", out, suite="toy")
        with pytest.raises(RunLocked, match=rf"Stage I folder {out} is being written .*PID {holder.pid}"):
            run_stage1(Stage1Config(data=str(tmp_path / "data1")), out)
        with pytest.raises(RunLocked, match=rf"Stage I data folder {out} is being written .*PID {holder.pid}"):
            build_stage1(Stage1DataConfig(), out)
        with pytest.raises(RunLocked, match=rf"engineer loop folder {out} is being written .*PID {holder.pid}"):
            run_engineer(EngineerConfig(suite="toy", harness="react", backbone="scripted:pick-first", out=str(out)))
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in out.iterdir()) == ["writer.lock"]      # nothing else was written
    with sole_writer(out, "x"):                                          # the holder's exit handed the folder on
        pass


def test_a_step_runs_again_when_its_folder_is_gone_or_a_step_it_reads_from_ran_after_it(tmp_path):
    """Session 23: Stage I was rerun with a new config and the rerun skipped Stage II and III (their inputs, the
    adapter's path, had not changed) though their folders had been moved aside."""
    import shutil
    lines, steps = [], ["baselines", "data1", "data2"]
    cfg = PipelineConfig(**TOY)
    run_steps(cfg, tmp_path, steps)
    shutil.rmtree(tmp_path / "data1")
    manifest = run_steps(cfg, tmp_path, steps, echo=lines.append)
    done = {s: manifest["steps"][s]["wall_s"] for s in steps}
    assert lines == [f"baselines: done ({done['baselines']} s), skipped",
                     f"data1: running again: {tmp_path / 'data1'} is missing", f"data1: done in {done['data1']} s",
                     "data2: running again: data1 ran after it", f"data2: done in {done['data2']} s"]
    assert (tmp_path / "data1" / "sft.jsonl").is_file()
    lines.clear()
    run_steps(cfg, tmp_path, steps, echo=lines.append)
    assert all(line.endswith("skipped") for line in lines), lines


def test_a_step_whose_folder_holds_a_run_of_other_inputs_starts_over_and_keeps_the_old_folder(tmp_path):
    """Session 26: a seed added after Stage I was stopped mid-training; Stage I's folder held the old data's run, the
    stage refused to resume it and the pipeline stopped. Now the step starts over and the old folder is kept."""
    lines = []
    run_steps(PipelineConfig(**TOY), tmp_path, ["baselines"])
    old = sorted(p.name for p in (tmp_path / "baselines").rglob("run.sqlite"))
    capped = PipelineConfig(**{**TOY, "baseline_options": {"max_steps": 3}})   # the runs' own config differs
    step = run_steps(capped, tmp_path, ["baselines"], echo=lines.append)["steps"]["baselines"]
    aside = tmp_path / "baselines.replaced-1"
    assert lines[:2] == ["baselines: running", f"baselines: {tmp_path / 'baselines'} held a run with other inputs, "
                                                f"kept as {aside}; starting over"]
    assert sorted(p.name for p in aside.rglob("run.sqlite")) == old and step["status"] == "done"
    assert step["inputs"]["max_steps"] == 3 and (tmp_path / "baselines").is_dir()


def test_an_evaluation_of_an_adapter_trained_again_into_the_same_path_is_set_aside(tmp_path):
    """Session 26: Stage II was to be trained again (with rehearsal) into stage2/adapter; its validity summary and
    streaming run would have been returned or resumed for the new weights, since both key on the adapter's path."""
    from jitlab.train.pipeline import _claim
    adapter, folder = tmp_path / "stage2" / "adapter", tmp_path / "validity" / "stage2"
    adapter.mkdir(parents=True)
    (adapter / "adapter_model.safetensors").write_bytes(b"first weights")
    _claim(folder, f"hf:{adapter}")
    (folder / "summary.json").write_text("{}")
    _claim(folder, f"hf:{adapter}")                                  # the same weights: kept
    assert (folder / "summary.json").is_file() and not (tmp_path / "validity" / "stage2.replaced-1").exists()
    (adapter / "adapter_model.safetensors").write_bytes(b"trained again")
    _claim(folder, f"hf:{adapter}")
    assert (tmp_path / "validity" / "stage2.replaced-1" / "summary.json").is_file()
    assert sorted(p.name for p in folder.iterdir()) == ["policy.json"]
    base = tmp_path / "validity" / "base"
    base.mkdir()
    (base / "summary.json").write_text("{}")                         # made before the record existed: adopted
    _claim(base, "embedded")
    assert (base / "summary.json").is_file() and json.loads((base / "policy.json").read_text()) == \
        {"backbone": "embedded", "sha256": None}


def test_pipeline_run_names_the_folder_as_the_command_did_from_the_repository_root(tmp_path, monkeypatch):
    """Notebooks 02-04 open a pipeline's run through it: the config from its YAML, the folder relative when inside
    the checkout (the records hold the paths `jitlab train pipeline --out runs/pipeline/<suite>` wrote)."""
    from jitlab.train.pipeline import pipeline_run
    monkeypatch.chdir(tmp_path)
    cfg, out = pipeline_run(CONFIG_DIR / "pipeline.yaml", REPO / "runs" / "pipeline" / "textworld")
    assert Path.cwd() == REPO and out == Path("runs/pipeline/textworld") and cfg.suite == "textworld"
    assert pipeline_run(CONFIG_DIR / "pipeline.yaml", tmp_path / "elsewhere")[1] == tmp_path / "elsewhere"


def test_the_baselines_run_their_seeds_on_the_train_split_and_stage1_data_takes_them(tmp_path):
    """Issue 30: teacher evidence comes from the train split (disjoint from the dev picks and the test evaluation):
    every baseline episode is a train task, the step records the split, and Stage I data keeps that evidence."""
    from jitlab.store import load
    manifest = run_steps(PipelineConfig(**TOY), tmp_path, ["baselines", "data1"])
    step = manifest["steps"]["baselines"]
    assert step["inputs"]["split"] == "train" and step["fingerprint"]["baseline_split"] == "train"
    for run_dir in step["outputs"]["runs"]:
        tasks = set(load(run_dir)["episodes"]["task_id"])
        assert tasks == {"toy-train-0", "toy-train-1"}, (run_dir, tasks)
    data1 = json.loads((tmp_path / "data1" / "manifest.json").read_text())
    assert data1["counts"]["sft"] >= 1 and data1["dropped"]["other_split"] == data1["dropped"]["test_split"] == 0
    assert {json.loads(line)["split"] for line in (tmp_path / "data1" / "sft.jsonl").read_text().splitlines()} == \
        {"train"}
    dev = run_steps(PipelineConfig(**{**TOY, "seeds": ["react"], "baseline_split": "dev"}), tmp_path / "dev",
                    ["baselines"])["steps"]["baselines"]
    assert set(load(dev["outputs"]["runs"][0])["episodes"]["task_id"]) == {"toy-dev-0", "toy-dev-1"}


def test_a_small_model_harness_s_evidence_becomes_stage1_data(tmp_path):
    """Issue 30: the new space's fixed harnesses read back as plans, so their episodes are SFT targets and, where they
    beat ReAct, the chosen side of a pair (scripted executor: a test double whose scores are word overlap)."""
    cfg = PipelineConfig(**{**TOY, "seeds": ["react", "small_model/likelihood"]})
    run_steps(cfg, tmp_path, ["baselines", "data1"])
    data1 = json.loads((tmp_path / "data1" / "manifest.json").read_text())
    assert data1["dropped"]["not_a_plan"] == 0 and data1["counts"]["plans"] == 2
    read = lambda name: [json.loads(line) for line in (tmp_path / "data1" / name).read_text().splitlines()]  # noqa: E731
    assert {json.loads(r["plan"])["A"] for r in read("sft.jsonl")} == {"LikelihoodAction"}
    pairs = read("pairs.jsonl")
    assert pairs and all('"LikelihoodAction"' in p["chosen"][0]["content"] and
                         '"ReActAction"' in p["rejected"][0]["content"] for p in pairs)


@pytest.mark.parametrize("split", ["test", "holdout", "tets"])
def test_baselines_on_a_held_out_split_are_refused_before_anything_is_written(tmp_path, split):
    with pytest.raises(ConfigError, match=f"baseline_split must be train or dev, got '{split}'"):
        PipelineConfig(**{**TOY, "baseline_split": split})
    bad = tmp_path / "p.yaml"
    bad.write_text(f"suite: toy\nexecutor: scripted:pick-first\nbaseline_split: {split}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "jitlab.cli", "train", "pipeline", "--config", str(bad), "--out",
                           str(tmp_path / "o")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "baseline_split must be train or dev" in proc.stderr
    assert not (tmp_path / "o").exists()


# issue 30: each suite's new-space config: the fixed small-model harness of the suite beside ReAct, full budgets,
# one train task per family (TextWorld: per family and level), evaluations on the test-task counts
NEW_SPACE = {"pipeline.yaml": ("textworld", "small_model/explorer", 9, 36),
             "pipeline-babyai.yaml": ("babyai", "small_model/navigator", 7, 35),
             "pipeline-dbbench.yaml": ("dbbench", "small_model/sql", 10, 50)}


@pytest.mark.parametrize("name", sorted(NEW_SPACE))
def test_the_new_space_configs_gather_train_evidence_on_every_family(name, monkeypatch):
    from jitlab.envs.base import get_suite
    from jitlab.harness import resolve
    from jitlab.train.pipeline import check_stages
    suite_name, fixed, limit, eval_limit = NEW_SPACE[name]
    monkeypatch.chdir(REPO)                             # compare_runs: paths from the working directory
    cfg = load_config(PipelineConfig, CONFIG_DIR / name)
    check_stages(cfg, Path("/nonexistent"))
    assert (cfg.suite, cfg.baseline_split, cfg.baseline_limit) == (suite_name, "train", limit)
    assert {"react", fixed} <= set(cfg.seeds) and all(resolve(s).is_dir() for s in cfg.seeds)
    caps = {"max_steps", "max_tokens"}                  # the tasks' full budgets, for evidence and evaluation
    assert not caps & set(cfg.baseline_options) and not caps & set(cfg.eval_options)
    assert (cfg.eval_split, cfg.eval_limit) == ("test", eval_limit)
    suite = get_suite(suite_name)
    evidence = suite.tasks("train")[:limit]
    assert {t.family for t in evidence} == set(suite.families), name
    if suite_name == "textworld":    # every family x level once
        assert len({t.id.rsplit("-", 2)[0] for t in evidence}) == limit
    assert cfg.stage3.get("split") == "train"     # Stage III samples train tasks too, never the dev picks' tasks


def test_the_mix_config_learns_from_the_three_suites_teachers_and_pairs_with_the_streams_compose_jit(monkeypatch):
    """pipeline-mix.yaml: its teacher evidence (the committed baseline exports) is each suite config's seeds on that
    config's train tasks, which together are the mix's train split; its test split is the 30-task mixed stream, whose
    compose JIT run (recorded under mix30.yaml) passes the compare_runs check."""
    import pandas as pd

    from jitlab.envs.base import get_suite
    from jitlab.train.pipeline import check_stages
    monkeypatch.chdir(REPO)
    cfg = load_config(PipelineConfig, CONFIG_DIR / "pipeline-mix.yaml")
    check_stages(cfg, Path("/nonexistent"))
    seeds, played = {}, set()
    for run in cfg.runs:
        summary = json.loads((REPO / run / "summary.json").read_text())
        assert (summary["split"], summary["backbone"]) == ("train", cfg.executor), run
        seeds.setdefault(summary["suite"], set()).add(summary["harness"])
        played |= set(pd.read_csv(REPO / run / "episodes.csv")["task_id"])
    for name, (suite_name, *_rest) in NEW_SPACE.items():
        assert seeds[suite_name] == set(load_config(PipelineConfig, CONFIG_DIR / name).seeds), name
    mix = get_suite(cfg.suite)
    assert played == {t.id for t in mix.tasks("train")}
    assert [t.id for t in mix.tasks("test")] == [t.id for t in get_suite("mix:results/mix-30/mix30.yaml").tasks("test")]
    assert cfg.eval_limit == 30 and cfg.stage3.get("split") == "train"


@pytest.mark.parametrize("name", sorted(NEW_SPACE))
def test_the_suite_configs_play_the_intermediate_policies_on_a_prefix_with_every_family_twice(name, monkeypatch):
    """Issue 43: base and stage3 on the whole evaluation, stage1 and stage2 on the split's first tasks, each family at
    least twice (TextWorld: each family x level); the final policy paired with the compose JIT on the same tasks."""
    from collections import Counter

    from jitlab.envs.base import get_suite
    from jitlab.train.pipeline import check_stages, eval_limit_of
    suite_name, _, _, eval_limit = NEW_SPACE[name]
    monkeypatch.chdir(REPO)
    cfg = load_config(PipelineConfig, CONFIG_DIR / name)
    check_stages(cfg, Path("/nonexistent"))
    assert [eval_limit_of(cfg, p) for p in ("base", "stage3")] == [eval_limit, eval_limit]
    prefix = eval_limit_of(cfg, "stage1")
    assert eval_limit_of(cfg, "stage2") == prefix < eval_limit
    suite = get_suite(suite_name)
    tasks = suite.tasks("test")[:prefix]
    cells = Counter(t.id.rsplit("-", 2)[0] if suite_name == "textworld" else t.family for t in tasks)
    assert {t.family for t in tasks} == set(suite.families) and min(cells.values()) == 2, cells
    (run,) = cfg.compare_runs
    config = json.loads((REPO / run / "run.json").read_text())["config"]
    assert (config["generator"], config["mode"], config["limit"]) == ("compose", "streaming", eval_limit)


def test_eval_limits_are_checked_naming_the_field_before_anything_is_written(tmp_path):
    for limits, said in (({"stage9": 3}, "eval_limits: unknown policy stage9; use base, stage1, stage2, stage3"),
                         ({"stage1": 0}, "eval_limits: stage1 must be >= 1, got 0"),
                         ({"stage1": 2.5}, "eval_limits: stage1 must be an integer, got 2.5"),
                         ([12], "eval_limits must be a mapping of policy to tasks")):
        with pytest.raises(ConfigError) as exc:
            PipelineConfig(eval_limits=limits)
        assert said in str(exc.value) and "\n" not in str(exc.value)
    bad = tmp_path / "p.yaml"
    bad.write_text("suite: toy\neval_limits: {stage1: 2, stage4: 1}\n")
    with pytest.raises(ConfigError, match="eval_limits: unknown policy stage4"):
        load_config(PipelineConfig, bad)


def test_compare_runs_on_another_split_or_missing_are_refused_before_any_step(tmp_path):
    from jitlab.train.pipeline import check_stages
    react = "results/full-budget-textworld-test/textworld-react"
    check_stages(PipelineConfig(**{**TOY, "suite": "textworld", "compare_runs": [str(REPO / react)]}), tmp_path / "o")
    with pytest.raises(ConfigError, match="compare_runs: .*textworld-react is a textworld test run; give runs on toy test"):
        run_steps(PipelineConfig(**{**TOY, "compare_runs": [str(REPO / react)]}), tmp_path / "o", ["baselines"])
    with pytest.raises(ConfigError, match="compare_runs: .*nothing-here is no run"):
        run_steps(PipelineConfig(**{**TOY, "compare_runs": [str(tmp_path / "nothing-here")]}), tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_compare_run_of_the_same_stream_under_another_mix_spec_is_accepted(tmp_path):
    """The mixed test stream's compose JIT (recorded under mix30.yaml) beside a pipeline whose mix spec adds a train
    split: the same 30 tasks in the same order pass the check; the same tasks in a shuffled order are refused."""
    from jitlab.train.pipeline import check_stages
    run = str(REPO / "results/mix-30/pipeline-final/mix30-compose-ov")
    spec = tmp_path / "mix.yaml"
    parts = "parts:\n  textworld: {train: 1, test: 9}\n  babyai: {train: 1, test: 12}\n  dbbench: {train: 1, test: 9}\n"
    spec.write_text(parts)
    check_stages(PipelineConfig(**{**TOY, "suite": f"mix:{spec}", "compare_runs": [run]}), tmp_path / "o")
    spec.write_text(parts + "shuffle: 1\n")
    with pytest.raises(ConfigError, match="compare_runs: .*mix30-compose-ov is a mix:results/mix-30/mix30.yaml test run"):
        check_stages(PipelineConfig(**{**TOY, "suite": f"mix:{spec}", "compare_runs": [run]}), tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_each_policy_plays_its_own_prefix_in_both_evaluations(tmp_path, monkeypatch):
    """eval_limits reaches the validity evaluation and the streaming JIT run of the policies it names (TEST DOUBLES
    of both: they record the limit they were given)."""
    from jitlab.train import pipeline
    seen = {}

    def validity(backbone, out, **kw):
        seen["validity", Path(out).name] = kw["limit"]
        return {}

    def streaming(jit):
        seen["streaming", Path(jit.out).name] = jit.limit
        Path(jit.out).mkdir(parents=True, exist_ok=True)   # the pipeline made it (policy.json)
        (Path(jit.out) / "summary.json").write_text("{}")
        return Path(jit.out)
    monkeypatch.setattr(pipeline, "evaluate_generator", validity)
    monkeypatch.setattr(pipeline, "run_jit", streaming)
    cfg = PipelineConfig(**{**TOY, "eval_limit": 5, "eval_limits": {"stage1": 2}})
    policies = {"base": "embedded", "stage1": "hf:a", "stage3": "hf:c"}
    for mode in ("validity", "streaming"):
        pipeline.evaluate_policies(cfg, tmp_path, mode, policies)
    assert seen == {(mode, p): n for mode in ("validity", "streaming") for p, n in (("base", 5), ("stage1", 2),
                                                                                     ("stage3", 5))}


def test_a_relative_out_puts_every_step_under_the_working_directory(tmp_path, monkeypatch):
    """Issue 27 item 16: ``cd /elsewhere && jitlab train pipeline --config c.yaml --out runs/x`` wrote its baselines
    into the checkout (``<repo>/runs/x/baselines``: run_grid resolves against the repository root) and the other
    steps under ``/elsewhere/runs/x``; every step now writes under the working directory."""
    from jitlab.paths import repo_root
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    manifest = run_steps(PipelineConfig(**{**TOY, "seeds": ["react"], "baseline_limit": 1}), "runs/x",
                         ["baselines", "data1"])
    runs = manifest["steps"]["baselines"]["outputs"]["runs"]
    assert runs and all(Path(r).is_relative_to(work / "runs" / "x" / "baselines") for r in runs), runs
    assert (work / "runs" / "x" / "data1").is_dir() and (work / "runs" / "x" / "pipeline.json").is_file()
    assert not (repo_root() / "runs" / "x").exists()


def test_cli_bad_config_is_one_line(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("stage1: {sft_steps: 2}\nsuit: toy\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "jitlab.cli", "train", "pipeline", "--config", str(bad), "--out",
                           str(tmp_path / "o")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown key(s) suit" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_the_smoke_pipeline_end_to_end_and_resumed(tmp_path):
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    out = tmp_path / "p"
    cmd = [sys.executable, "-m", "jitlab.cli", "train", "pipeline", "--config",
           str(CONFIG_DIR / "pipeline-smoke.yaml"), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True, timeout=1800)
    manifest = json.loads((out / "pipeline.json").read_text())
    assert set(manifest["steps"]) == set(STEPS) and all(s["status"] == "done" for s in manifest["steps"].values())
    assert all(s["wall_s"] >= 0 for s in manifest["steps"].values()) and manifest["total_wall_s"] > 0
    steps = manifest["steps"]
    assert steps["stage1"]["outputs"]["phases"]["dpo"]["global_step"] == 1
    assert steps["stage3"]["outputs"]["phases"]["grpo"]["global_step"] == 1      # 1 task < grad_accum: still a step
    from safetensors.torch import load_file
    adapters = sorted(out.glob("stage*/*/adapter/adapter_model.safetensors"))
    assert len(adapters) >= 4                                                   # stage1 sft + dpo, stage2, stage3
    for path in adapters:   # issue 27 item 15: 1-step phases ran at lr 0 and saved all-zero LoRA B matrices
        assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in load_file(path).items()), path
    assert set(steps["validity"]["outputs"]) == set(steps["streaming"]["outputs"]) == {"base", "stage3"}
    stage3 = json.loads((out / "stage3" / "manifest.json").read_text())
    assert stage3["below"][-1].endswith("stage2/sft/adapter")                  # III starts from II, II from I
    assert json.loads((out / "stage2" / "manifest.json").read_text())["below"][-1].endswith("stage1/dpo/adapter")
    streaming = json.loads((out / "streaming" / "stage3" / "summary.json").read_text())
    assert streaming["mode"] == "streaming" and streaming["generator"] == f"plan:hf:{out / 'stage3' / 'adapter'}"
    for stem in ("training_loss.png", "stage3_channels.png", "eval_validity.md", "eval_streaming.md"):
        assert (out / "figures" / stem).stat().st_size > 100, stem
    assert "training_loss" in (out / "figures" / "README.md").read_text()
    rerun = subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True, text=True, timeout=600)
    assert rerun.stdout.count("skipped") == len(STEPS) - 1                       # figures are always redrawn


@pytest.mark.slow
def test_the_code_format_through_every_stage(tmp_path):
    """format: code on the toy suite: thin file targets on code:<backbone>'s prompt, one optimizer step per phase on
    the embedded model, code repairs in Stage II, file sets sampled in Stage III, code-format validity."""
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    from jitlab.sandbox import probe
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    one = {"grad_accum": 1, "save_steps": 1, "gradient_checkpointing": True}   # 5-8k-token rows: past 23 GB without
    cfg = PipelineConfig(**{**TOY, "format": "code", "data1": {"k_references": 1, "code_form": "thin",
                                                                "code_references": 0},
                            "stage1": {"max_length": 5120, "sft_steps": 1, "dpo": False, **one},
                            "data2": {"only": ["react", "hiagent"], "heldout_seeds": ["hiagent"], "ops": ["drop_colon"]},
                            "stage2": {"max_length": 8192, "steps": 1, "eval_limit": 1, "eval_rounds": 1, **one},
                            "stage3": {"tasks": 1, "steps": 1, "num_generations": 2, "max_completion_length": 32,
                                       "episode_steps": 2, "smoke_steps": 1, **one},
                            "eval_policies": ["base", "stage3"], "eval_limit": 1, "repair_rounds": 0,
                            "eval_max_new_tokens": 32, "eval_smoke_steps": 1, "allow_unisolated": not probe()[0]})
    manifest = run_steps(cfg, tmp_path, ["baselines", "data1", "stage1", "data2", "stage2", "stage3", "validity"])
    rows = [json.loads(line) for line in (tmp_path / "data1" / "sft.jsonl").read_text().splitlines()]
    assert rows and all(r["format"] == "code" and r["completion"][0]["content"].startswith("<file name=") for r in rows)
    repairs = [json.loads(line) for line in (tmp_path / "data2" / "repairs.jsonl").read_text().splitlines()]
    assert repairs and {r["format"] for r in repairs} == {"code"}
    assert manifest["steps"]["stage2"]["outputs"]["phases"]["sft"]["global_step"] == 1
    completions = [json.loads(line) for line in (tmp_path / "stage3" / "completions.jsonl").read_text().splitlines()]
    assert len(completions) == 2 and manifest["steps"]["stage3"]["outputs"]["phases"]["grpo"]["global_step"] == 1
    for policy in ("base", "stage3"):
        summary = json.loads((tmp_path / "validity" / policy / "summary.json").read_text())
        assert summary["format"] == "code" and summary["n"] == 1 and summary["code_references"] == 0


def test_a_typo_in_stage3s_mapping_fails_at_once_naming_the_key(tmp_path):
    """Every stage's config is checked before the first step runs: nothing is written, no baseline is run (a
    baseline would write under the folder; no wall-time bound, which a loaded machine breaks)."""
    bad = tmp_path / "p.yaml"
    bad.write_text("suite: toy\nexecutor: scripted:pick-first\nstage3: {steps: 1, num_generationz: 2}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "jitlab.cli", "train", "pipeline", "--config", str(bad), "--out",
                           str(tmp_path / "o")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "pipeline config, stage3" in proc.stderr and "num_generationz" in proc.stderr
    assert not (tmp_path / "o").exists()
    with pytest.raises(ConfigError, match="eval_options: unknown key.*retrievl"):
        run_steps(PipelineConfig(eval_options={"retrievl": "bm25"}), tmp_path / "o2", ["baselines"])
    assert not (tmp_path / "o2").exists()


def test_the_fingerprints_come_from_the_step_table():
    from dataclasses import fields

    from jitlab.train.pipeline import PIPELINE, _fingerprint
    assert tuple(s.name for s in PIPELINE) == STEPS
    read = {k for s in PIPELINE for k in s.reads}
    assert {f.name for f in fields(PipelineConfig)} - read == {"eval_concurrency"}   # speed only: no rerun
    cfg = PipelineConfig(**TOY)
    for step in PIPELINE:
        fp = _fingerprint(cfg, Path("/nonexistent"), step.name)
        assert set(step.reads) <= set(fp), step.name
        other = PipelineConfig(**{**TOY, "eval_concurrency": 4})
        assert _fingerprint(other, Path("/nonexistent"), step.name) == fp
    assert _fingerprint(PipelineConfig(**{**TOY, "stage3": {"steps": 3}}), Path("/x"), "stage3") != \
        _fingerprint(cfg, Path("/x"), "stage3")
    prefix = PipelineConfig(**{**TOY, "eval_limits": {"stage1": 2}})      # a policy's task count reruns both evaluations
    assert [s.name for s in PIPELINE if _fingerprint(prefix, Path("/x"), s.name) != _fingerprint(cfg, Path("/x"), s.name)] \
        == ["validity", "streaming"]
