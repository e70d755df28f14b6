"""--repeat K (jitlab/repeats.py): what a seed varies, the refusal when nothing does, resume per repeat, and the
reliability summary (pass@1 over repeats, pass^k, per-task variance) against hand-computed values."""
import json

import pandas as pd
import pytest

from jitlab.errors import ConfigError
from jitlab.repeats import check_repeat, repeat_summary, what_varies
from jitlab.runner import RunConfig, run
from jitlab.runtime import LLMHandle
from jitlab.store import load


class _Suite:  # a TEST DOUBLE of a suite: only the attributes repeats.py reads
    def __init__(self, reset_varies):
        self.name, self.reset_varies = "double", reset_varies


def _cfg(out, **kw):
    base = dict(suite="toy", harness="react", backbone="scripted:pick-hash", limit=3, out=str(out), quiet=True)
    return RunConfig(**{**base, **kw})


def test_what_a_seed_varies_and_the_refusal_when_nothing_does():
    assert what_varies(_Suite(True), {}) == "reset"
    assert what_varies(_Suite(False), {"temperature": 0.7}) == "sampling"
    assert what_varies(_Suite(True), {"temperature": 0.5}) == "reset+sampling"
    assert check_repeat(_Suite(False), {}, 1) == "nothing"  # one repeat needs nothing to vary
    with pytest.raises(ConfigError, match="identical episodes.*temperature=0.7"):
        check_repeat(_Suite(False), {"temperature": 0}, 3)


def test_a_greedy_repeat_on_a_deterministic_suite_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="--repeat 2 on toy would rerun identical episodes"):
        run(_cfg(tmp_path / "r", repeat=2))
    assert not (tmp_path / "r").exists()


def test_repeats_run_at_consecutive_seeds_differ_resume_and_are_summarised(tmp_path):
    cfg = _cfg(tmp_path / "r", repeat=3, seed=5, backbone_options={"temperature": 0.7})
    out = run(cfg)
    eps = load(out)["episodes"]
    assert sorted(eps["seed"].unique()) == [5, 6, 7] and len(eps) == 9 and eps["final"].all()
    extras = [json.loads(e) for e in eps["extra"]]
    assert {(x["repeat"], x["varies"]) for x in extras} == {(0, "sampling"), (1, "sampling"), (2, "sampling")}
    steps = load(out)["steps"].merge(eps[["id", "task_id", "seed"]], left_on="episode_id", right_on="id")
    paths = steps.sort_values("step").groupby(["task_id", "seed"])["args"].apply(tuple)
    assert any(paths[t].nunique() > 1 for t in eps["task_id"].unique())  # the sampling seed reached the backbone
    run(cfg)  # resume: every (task, seed) is finished, nothing reruns
    assert len(load(out)["episodes"]) == 9
    summary = json.loads((out / "summary.json").read_text())
    rates = eps.groupby("task_id")["success"].mean()
    r = summary["repeats"]
    assert r["k"] == 3 and r["seeds"] == [5, 6, 7] and r["varies"] == ["sampling"]
    assert r["pass_at_1"] == pytest.approx(rates.mean())
    assert r["pass_hat_k"] == pytest.approx((rates == 1).mean())


def test_a_single_seed_run_has_no_repeats_key(tmp_path):
    summary = json.loads((run(_cfg(tmp_path / "r")) / "summary.json").read_text())
    assert "repeats" not in summary


def test_repeat_summary_against_a_hand_computed_case():
    # task a solved 3/3, b 1/3, c 0/3: pass@1 = (1 + 1/3 + 0) / 3 = 4/9, pass^3 = 1/3, one mixed task,
    # per-task success variance (ddof 1): a 0, b 1/3, c 0 -> mean 1/9
    rows = [(t, s, ok) for t, oks in (("a", (1, 1, 1)), ("b", (1, 0, 0)), ("c", (0, 0, 0))) for s, ok in enumerate(oks)]
    done = pd.DataFrame([{"id": i, "task_id": t, "seed": s, "success": ok, "reward": float(ok), "extra": "{}"}
                         for i, (t, s, ok) in enumerate(rows)])
    r = repeat_summary(done)
    assert r["pass_at_1"] == pytest.approx(4 / 9) and r["pass_hat_k"] == pytest.approx(1 / 3)
    assert r["tasks_mixed"] == 1 and r["success_var_per_task"] == pytest.approx(1 / 9)
    assert r["per_task"]["b"] == {"k": 3, "successes": 1, "reward_mean": pytest.approx(1 / 3),
                                  "reward_var": pytest.approx(1 / 3)}
    assert r["pass_at_1_wilson"][0] < 4 / 9 < r["pass_at_1_wilson"][1]
    assert repeat_summary(done[done["seed"] == 0]) is None  # one seed per task: no repeats


class _Recorder:  # a TEST DOUBLE backbone that records the params it is called with
    id = "recorder"

    def __init__(self):
        self.params = []

    def chat(self, messages, **params):
        from jitlab.protocol import Completion
        self.params.append(params)
        return Completion(text="Action: look", prompt_tokens=1, completion_tokens=1)


def test_the_episode_seed_is_the_sampling_seed_only_for_a_sampling_backbone():
    greedy, sampled = _Recorder(), _Recorder()
    LLMHandle(greedy, seed=4).chat([{"role": "user", "content": "hi"}], max_new_tokens=5)
    LLMHandle(sampled, seed=4, sample_seed=True).chat([{"role": "user", "content": "hi"}], max_new_tokens=5)
    LLMHandle(sampled, seed=4, sample_seed=True).chat([{"role": "user", "content": "hi"}], seed=9)
    assert greedy.params == [{"max_new_tokens": 5}]
    assert sampled.params == [{"seed": 4, "max_new_tokens": 5}, {"seed": 9}]  # a module's own seed wins


def test_jit_repeats_are_independent_runs_with_their_own_banks(tmp_path, capsys):
    from jitlab.cli import main
    out = tmp_path / "jit"
    argv = ["jit", "--suite", "toy", "--mode", "streaming", "--generator", "compose", "--backbone", "scripted:pick-hash",
            "--limit", "2", "--retrieval", "bm25", "--quiet", "--repeat", "2", "--out", str(out)]
    assert main(argv) != 0 and not out.exists()  # greedy on a deterministic suite: refused, nothing written
    assert "would rerun identical episodes" in capsys.readouterr().err
    assert main([*argv, "--backbone-option", "temperature=0.7"]) == 0
    assert "repeats in" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"] == [str(out / "seed0"), str(out / "seed1")]
    for seed in (0, 1):
        eps = load(out / f"seed{seed}")["episodes"]
        assert set(eps["seed"]) == {seed} and (out / f"seed{seed}" / "bank.sqlite").is_file()
    assert summary["repeats"]["k"] == 2 and summary["n_episodes"] == 4
    assert summary["repeats"]["pass_at_1"] == pytest.approx(summary["success_rate"])


def test_a_grid_with_repeats_reports_pass_hat_k_per_cell(tmp_path):
    from jitlab.experiments import REPEAT_COLUMNS, run_grid
    rows = run_grid("toy", ["react", "random"], "scripted:pick-hash", limit=2, out_root=tmp_path / "grid", repeat=2,
                    backbone_options={"temperature": 0.7})
    assert set(REPEAT_COLUMNS) <= set(rows.columns) and (rows["repeats_k"] == 2).all()
    for row in rows.itertuples():
        eps = load(row.run_dir)["episodes"]
        assert sorted(eps["seed"].unique()) == [0, 1]
        rates = eps.groupby("task_id")["success"].mean()
        assert row.pass_at_1 == pytest.approx(rates.mean()) and row.pass_hat_k == pytest.approx((rates == 1).mean())
