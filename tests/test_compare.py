"""jitlab.compare and ``jitlab compare``: paired statistics against a hand-computed case, refusals that name the
difference, and the command on two committed exports. The B runs are copies of a committed export whose episode
rows are edited (test doubles of a second run, built from real records)."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from jitlab.cli import main
from jitlab.compare import compare_runs
from jitlab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
TW = ROOT / "results" / "full-budget-textworld-test"
REACT, AORCH = TW / "textworld-react", TW / "textworld-aorchestra"


def _copy(tmp_path, name, edit=None, config=None) -> Path:
    """A copy of the ReAct export whose episodes (``edit(df) -> df``) or config keys are changed."""
    out = tmp_path / name
    shutil.copytree(REACT, out)
    if edit is not None:
        eps = pd.read_csv(out / "episodes.csv", keep_default_na=False, dtype=str)
        edit(eps).to_csv(out / "episodes.csv", index=False, lineterminator="\n")
    if config:
        info = json.loads((out / "run.json").read_text())
        info["config"].update(config)
        (out / "run.json").write_text(json.dumps(info))
    return out


def test_paired_statistics_match_a_hand_computed_case(tmp_path):
    a = pd.read_csv(REACT / "episodes.csv")
    solved = set(a.loc[a["success"] == 1, "task_id"])          # ReAct solved the two coin_collector l1 tasks
    assert len(solved) == 2
    lost = sorted(solved)[0]
    won = sorted(set(a["task_id"]) - solved)[:4]

    def edit(eps):
        eps.loc[eps["task_id"] == lost, ["success", "reward"]] = ["0", "0.0"]
        eps.loc[eps["task_id"].isin(won), ["success", "reward"]] = ["1", "1.0"]
        eps["prompt_tokens"] = (eps["prompt_tokens"].astype(int) + 100).astype(str)   # +100 tokens on every task
        return eps
    b = _copy(tmp_path, "b", edit)
    table, flips, runs = compare_runs([REACT, b])
    row = table.iloc[0]
    assert (row["wins"], row["losses"], row["ties"], row["success_a"], row["success_b"]) == (4, 1, 5, 2, 5)
    # exact McNemar, 5 discordant pairs, min 1: 2 * (C(5,0) + C(5,1)) / 2^5 = 12/32
    assert row["mcnemar_p"] == pytest.approx(12 / 32)
    rb = a.set_index("task_id")["reward"].copy()
    rb[lost], rb[won] = 0.0, 1.0
    assert row["delta_reward"] == pytest.approx((rb - a.set_index("task_id")["reward"]).mean())
    assert row["delta_reward_lo"] <= row["delta_reward"] <= row["delta_reward_hi"]
    assert (row["delta_tokens"], row["delta_tokens_lo"], row["delta_tokens_hi"]) == pytest.approx((100, 100, 100))
    assert sorted(flips["task_id"]) == sorted([lost, *won])
    assert set(flips.loc[flips["task_id"] == lost, "direction"]) == {"loss"}
    assert runs[0].card["harness"] == "react"


def test_runs_on_different_task_lists_are_refused_naming_the_difference(tmp_path):
    gone = pd.read_csv(REACT / "episodes.csv")["task_id"].iloc[-1]
    fewer = _copy(tmp_path, "fewer", lambda eps: eps[eps["task_id"] != gone])
    with pytest.raises(ConfigError, match=rf"different task lists \(10 vs 9 .*only in textworld-react: {gone}#0"):
        compare_runs([REACT, fewer])
    other_seed = _copy(tmp_path, "seed1", lambda eps: eps.assign(seed="1"))
    with pytest.raises(ConfigError, match="different task lists"):
        compare_runs([REACT, other_seed])


def test_common_pairs_on_the_tasks_both_finished_and_still_refuses_none_in_common(tmp_path, capsys):
    gone = pd.read_csv(REACT / "episodes.csv")["task_id"].iloc[-1]
    fewer = _copy(tmp_path, "fewer", lambda eps: eps[eps["task_id"] != gone])
    table, _, _ = compare_runs([REACT, fewer], common=True)
    assert table["n_tasks"].iloc[0] == 9 and table["wins"].iloc[0] == table["losses"].iloc[0] == 0
    other_seed = _copy(tmp_path, "seed1", lambda eps: eps.assign(seed="1"))
    with pytest.raises(ConfigError, match="no task/seed pair finished in both"):
        compare_runs([REACT, other_seed], common=True)
    assert main(["compare", str(REACT), str(fewer), "--common"]) == 0
    out = capsys.readouterr().out
    assert "on the 9 pairs both finished; left out 1 only in textworld-react, 0 only in fewer" in out
    assert "paired on 9 task/seed pairs" in out
    fewest = _copy(tmp_path, "fewest", lambda eps: eps[eps["task_id"] != gone].iloc[1:])
    assert main(["compare", str(REACT), str(fewer), str(fewest), "--common"]) == 0
    out = capsys.readouterr().out   # rows on 9 and 8 pairs: the header names no single count
    assert "paired on the task/seed pairs of each row (tasks)" in out and "paired on 9" not in out


def test_runs_with_other_budgets_or_split_are_refused(tmp_path):
    capped = _copy(tmp_path, "capped", config={"max_steps": 5})
    with pytest.raises(ConfigError, match=r"budgets differ \(max_steps None vs 5\)"):
        compare_runs([REACT, capped])
    dev = _copy(tmp_path, "dev", config={"split": "dev"})
    with pytest.raises(ConfigError, match="different split"):
        compare_runs([REACT, dev])
    with pytest.raises(ConfigError, match="at least two runs"):
        compare_runs([REACT])


def test_jitlab_compare_prints_the_paired_table_of_two_committed_exports(tmp_path, capsys):
    assert main(["compare", str(REACT), str(AORCH), "--out", str(tmp_path / "cmp"), "--no-figure"]) == 0
    out = capsys.readouterr().out
    assert "McNemar exact p" in out
    # aorchestra won treasure_hunter l1, lost nothing: 1 discordant pair, p = 1
    line = next(x for x in out.splitlines() if x.startswith("| textworld-react | textworld-aorchestra"))
    assert "| 1 / 0 / 9 | 1 |" in line and "tw-treasure_hunter-l1-test-00#0 +" in line
    assert out.count("budgets: max_steps each task's own, max_tokens 60000") == 2   # both cards printed
    written = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert written.loc[0, "mcnemar_p"] == 1.0 and written.loc[0, "wins"] == 1
    assert "## Harness cards" in (tmp_path / "cmp" / "compare.md").read_text()


def test_compare_figure_holds_the_paired_intervals():
    from jitlab.viz.compare import fig_compare
    table, _, _ = compare_runs([REACT, AORCH, TW / "textworld-jit-streaming"])
    bars = [e for e in fig_compare(table).traverse(lambda x: x) if type(e).__name__ == "ErrorBars"]
    assert len(bars) == 2                                   # Δ reward and Δ tokens, one point per pair
    for b, col in zip(bars, ("delta_reward", "delta_tokens")):
        y = b.dimension_values(1)
        assert list(y) == pytest.approx(list(table[col]))
        assert list(y - b.dimension_values("neg")) == pytest.approx(list(table[f"{col}_lo"]))
        assert list(y + b.dimension_values("pos")) == pytest.approx(list(table[f"{col}_hi"]))


def test_runs_with_no_finished_episode_have_nothing_to_pair(tmp_path, capsys):
    """Issue 45 item 8: jitlab compare a b, neither with a finished episode (every attempt infra_error): before, a
    0-pair table with p = 1, exit 0."""
    unfinished = lambda eps: eps.assign(status="infra_error")
    a, b = _copy(tmp_path, "a", unfinished), _copy(tmp_path, "b", unfinished)
    for common in (False, True):
        with pytest.raises(ConfigError, match="nothing to pair, a and b have no finished episode"):
            compare_runs([a, b], common=common)
    with pytest.raises(ConfigError, match="nothing to pair, b has no finished episode"):
        compare_runs([REACT, b], common=True)
    assert main(["compare", str(a), str(b)]) == 2
    assert "nothing to pair" in capsys.readouterr().err


def test_a_budget_that_bound_no_episode_does_not_block_the_comparison(tmp_path, capsys):
    """Issue 45 item 11: jitlab compare results/small-model-jit/tw-test-react results/small-model-jit/
    tw-test-jit-stream2 (max_wall_s 7200 vs 3600, no episode near 3600 s): before, refused ("budgets differ"). An
    episode that used the lower budget still refuses it."""
    longer = _copy(tmp_path, "longer", config={"max_wall_s": 7200.0})
    table, _, _ = compare_runs([longer, REACT])
    assert table["budgets"].iloc[0] == "max_wall_s 7200.0 vs 3600.0 (bound no episode)"
    slow = _copy(tmp_path, "slow", lambda eps: eps.assign(wall_s=eps["wall_s"].where(eps.index != 0, "3600.5")),
                 config={"max_wall_s": 7200.0})
    with pytest.raises(ConfigError, match=r"budgets differ \(max_wall_s 7200.0 vs 3600.0\) and bound an episode "
                                          r"\(max_wall_s: an episode used 3600.5"):
        compare_runs([slow, REACT])
    assert compare_runs([REACT, AORCH])[0]["budgets"].iloc[0] == ""
    small = ROOT / "results" / "small-model-jit"
    assert main(["compare", str(small / "tw-test-react"), str(small / "tw-test-jit-stream2")]) == 0
    assert "budgets: tw-test-jit-stream2 vs tw-test-react: max_wall_s 7200.0 vs 3600.0 (bound no episode)" in \
        capsys.readouterr().out
