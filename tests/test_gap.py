"""jitlab.gap and ``jitlab gap``: the four rows (best single, per-family oracle, per-instance oracle, JIT) and the
share of the gap closed, from small runs whose numbers are checked by hand; refusals in one line.

The runs (records written with RunStore, one episode per task; reward = success):

    dev   (toy/chain: d1 d2 | dbbench/other: d3 d4)      test  (toy/chain: t1 t2 t3 | dbbench/other: t4 t5 t6)
    A     1 1 | 0 0   -> 2/4                             A     1 1 0 | 0 0 0   -> 2/6   100 tokens a task
    B     0 0 | 1 0   -> 1/4                             B     0 0 1 | 1 0 0   -> 2/6   200
    C     1 0 | 1 1   -> 3/4                             C     1 0 0 | 1 1 0   -> 3/6   300
                                                         JIT   1 0 1 | 1 1 0   -> 4/6  1000, stream order t1..t6

(a) best single on dev: C (3/4) -> 3/6 on test. (b) per family on dev: toy/chain A (2/2), dbbench/other C (2/2)
-> t1 t2 from A, t4 t5 from C: 4/6, tokens (3 * 100 + 3 * 300) / 6 = 200. (c) per instance: t1 A, t2 A, t3 B, t4 B
(B and C solve it, B is cheaper), t5 C, t6 none (the cheapest, A): 5/6, tokens (100+100+200+200+300+100)/6.
JIT gap share (4/6 - 3/6) / (5/6 - 3/6) = 0.5; on toy/chain (2/3 - 1/3) / (3/3 - 1/3) = 0.5; on dbbench/other
c = a = 2/3: no gap (NaN). JIT vs (b): won t3, lost t2 (McNemar p = 1); vs (a): won t3, lost none (p = 1).
Equal-weight over the two suites: JIT (2/3 + 2/3) / 2 with SE sqrt(2 * (2/3 * 1/3) / 3) / 2.
"""
import math
from types import SimpleNamespace

import pytest

from jitlab.cli import main
from jitlab.errors import ConfigError
from jitlab.gap import BEST_SINGLE, PER_FAMILY, PER_INSTANCE, gap_table
from jitlab.store import RunStore

MIX = "mix:toy+dbbench"
DEV = {"d1": "toy/chain", "d2": "toy/chain", "d3": "dbbench/other", "d4": "dbbench/other"}
TEST = {"t1": "toy/chain", "t2": "toy/chain", "t3": "toy/chain", "t4": "dbbench/other", "t5": "dbbench/other",
        "t6": "dbbench/other"}
DEV_WINS = {"A": "1100", "B": "0010", "C": "1011"}
TEST_WINS = {"A": "110000", "B": "001100", "C": "100110"}
TOKENS = {"A": 100, "B": 200, "C": 300, "jit": 1000}


def _write(out, harness, split, tasks, wins, tokens, jit=False, suite=MIX, backbone="scripted:x"):
    config = {"suite": suite, "split": split, "harness": "jit-streaming:compose" if jit else harness,
              "backbone": backbone, "max_steps": None, "max_tokens": 1000, "max_wall_s": 60.0}
    store = RunStore(out, config)
    for i, ((task_id, family), won) in enumerate(zip(tasks.items(), wins)):
        task = SimpleNamespace(id=task_id, family=family, split=split)
        ep = store.start_episode(harness, f"sha-{harness}-{i if jit else 0}", task, 0, 0, "none")
        store.finish_episode(ep, {"status": "ok", "success": won == "1", "reward": float(won), "steps": 1,
                                  "wall_s": 0.1, "tool_calls": 1, "extra": {"mode": "streaming", "stream_index": i}
                                  if jit else {}}, SimpleNamespace(prompt_tokens=tokens, completion_tokens=0,
                                                                   cost=0.0, calls=1))
    store.close()
    return out


@pytest.fixture
def runs(tmp_path):
    dev = [_write(tmp_path / "dev" / h, h, "dev", DEV, w, TOKENS[h]) for h, w in DEV_WINS.items()]
    test = [_write(tmp_path / "test" / h, h, "test", TEST, w, TOKENS[h]) for h, w in TEST_WINS.items()]
    jit = [_write(tmp_path / "jit" / "stream", "jit", "test", TEST, "101110", TOKENS["jit"], jit=True)]
    return dev, test, jit


def test_the_four_rows_and_the_gap_share_match_the_hand_computed_case(runs):
    dev, test, jit = runs
    t = gap_table(dev, test, jit, bins=2)
    rows = t.rows.set_index("row")
    assert list(rows.index) == [BEST_SINGLE, PER_FAMILY, PER_INSTANCE, "stream"]
    assert list(rows["success"]) == [3, 4, 5, 4] and set(rows["n_tasks"]) == {6}
    assert rows.loc[BEST_SINGLE, "ran"] == "C"
    assert list(rows["tokens_per_task"]) == pytest.approx([300, 200, 1000 / 6, 1000])
    assert list(rows["gap_share"]) == pytest.approx([0.0, 0.5, 1.0, 0.5])
    jit_row = rows.loc["stream"]
    assert (jit_row["vs_family_wins"], jit_row["vs_family_losses"], jit_row["vs_family_mcnemar_p"]) == (1, 1, 1.0)
    assert (jit_row["vs_single_wins"], jit_row["vs_single_losses"], jit_row["vs_single_mcnemar_p"]) == (1, 0, 1.0)
    assert jit_row["vs_family_delta_success"] == pytest.approx(0.0)
    assert jit_row["vs_single_delta_success"] == pytest.approx(1 / 6)
    assert jit_row["vs_single_delta_success_lo"] <= 1 / 6 <= jit_row["vs_single_delta_success_hi"]
    assert (jit_row["wilson_lo"], jit_row["wilson_hi"]) == pytest.approx((0.3000, 0.9032), abs=1e-4)
    assert jit_row["suites"] == 2 and jit_row["equal_weight_rate"] == pytest.approx(2 / 3)
    assert jit_row["equal_weight_se"] == pytest.approx(math.sqrt(2 * (2 / 9) / 3) / 2)
    chosen = t.chosen.set_index(["choice", "family"])["harness"].to_dict()
    assert chosen == {(BEST_SINGLE, "(all)"): "C", (PER_FAMILY, "toy/chain"): "A", (PER_FAMILY, "dbbench/other"): "C"}
    fam = t.families.set_index(["row", "suite", "family"])
    assert fam.loc[("stream", "toy", "chain"), "gap_share"] == pytest.approx(0.5)
    assert math.isnan(fam.loc[("stream", "dbbench", "other"), "gap_share"])
    assert fam.loc[(PER_INSTANCE, "toy", "(all)"), "success"] == 3
    assert fam.loc[(BEST_SINGLE, "toy", "chain"), "rate"] == pytest.approx(1 / 3)
    stream = t.stream.set_index(["row", "bin"])
    assert list(stream.loc["stream", "success"]) == [2, 2] and list(stream.loc["stream", "positions"]) == ["0-2", "3-5"]
    assert list(stream.loc[BEST_SINGLE, "success"]) == [1, 2]      # C on t1 t2 t3 | t4 t5 t6


def test_gap_refuses_runs_it_cannot_pair_in_one_line(runs, tmp_path):
    dev, test, jit = runs
    cases = [
        (dict(dev=dev[:2], test=test, jit=jit), "harness C has a test run but no dev run"),
        (dict(dev=dev, test=test, jit=[test[0]]), "is a fixed-harness run; pass it with --dev / --test"),
        (dict(dev=dev, test=[*test, jit[0]], jit=[]), "is a JIT run; pass it with --jit"),
        (dict(dev=test, test=test, jit=jit), "the dev runs are on split 'test'"),
        (dict(dev=[*dev, dev[0]], test=test, jit=jit), "a run is given twice in --dev"),
        (dict(dev=dev, test=test, jit=jit, bins=0), "--bins must be at least 1"),
    ]
    short = _write(tmp_path / "short" / "C", "C", "test", dict(list(TEST.items())[:5]), "10011", 300)
    cases.append((dict(dev=dev, test=[*test[:2], short], jit=jit), "different task lists"))
    leak = [_write(tmp_path / "leak" / h, h, "dev", {**DEV, "t1": "toy/chain"}, w + "0", 1) for h, w in DEV_WINS.items()]
    cases.append((dict(dev=leak, test=test, jit=jit), "task t1 is in both the dev and the test runs"))
    for kwargs, needle in cases:
        with pytest.raises(ConfigError) as err:
            gap_table(**kwargs)
        assert needle in str(err.value) and "\n" not in str(err.value), (needle, str(err.value))


def test_a_harness_record_in_per_suite_parts_reads_as_the_whole_mix_record(runs, tmp_path):
    """Harness A's dev record given as two single-suite runs (their families recorded without the suite) gives the
    same table as its one mix run; parts that share a task or differ in a setting are refused."""
    dev, test, jit = runs
    toy = {k: f.split("/")[1] for k, f in DEV.items() if f.startswith("toy/")}
    db = {k: f.split("/")[1] for k, f in DEV.items() if f.startswith("dbbench/")}
    parts = [_write(tmp_path / "A-toy", "A", "dev", toy, DEV_WINS["A"][:2], TOKENS["A"], suite="toy"),
             _write(tmp_path / "A-db", "A", "dev", db, DEV_WINS["A"][2:], TOKENS["A"], suite="dbbench")]
    whole, joined = gap_table(dev, test, jit, bins=2), gap_table([*parts, *dev[1:]], test, jit, bins=2)
    assert joined.rows.equals(whole.rows) and joined.chosen.equals(whole.chosen)
    assert len(joined.runs) == len(whole.runs) + 1                 # each part's card is printed
    again = _write(tmp_path / "A-db-again", "A", "dev", db, "00", TOKENS["A"], suite="dbbench")
    other = _write(tmp_path / "A-db-other", "A", "dev", db, "00", TOKENS["A"], suite="dbbench", backbone="scripted:y")
    cases = [([*parts, again, *dev[1:]], "task d3 is in two runs of harness A in --dev"),
             ([parts[0], other, *dev[1:]], "runs of harness A that differ in backbone ('scripted:x' in")]
    for dev_runs, needle in cases:
        with pytest.raises(ConfigError) as err:
            gap_table(dev_runs, test, jit)
        assert needle in str(err.value) and "\n" not in str(err.value), (needle, str(err.value))


def test_gap_command_prints_the_rows_and_writes_csv_and_md(runs, tmp_path, capsys):
    dev, test, jit = runs
    out = tmp_path / "table"
    assert main(["gap", "--dev", *map(str, dev), "--test", *map(str, test), "--jit", *map(str, jit), "--bins", "2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "per-family oracle" in printed and "0.67 (4/6; 0.30–0.90)" in printed and "gap closed" in printed
    assert sorted(p.name for p in out.iterdir()) == ["chosen.csv", "families.csv", "gap.md", "rows.csv", "stream.csv"]
    assert "| stream |" in (out / "gap.md").read_text()
    err = main(["gap", "--dev", *map(str, dev[:2]), "--test", *map(str, test)])
    assert err == 2 and "harness C has a test run but no dev run" in capsys.readouterr().err
