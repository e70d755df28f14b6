"""jitlab show RUN --time: where a run's episode time went (jitlab/timing.py), from a toy run with a scripted TEST
DOUBLE; the parts and their shares come from each episode's recorded breakdown."""
import json
import sqlite3

from jitlab.cli import main
from jitlab.store import load
from jitlab.timing import OUTSIDE, PARTS, time_breakdown


def test_show_time_prints_every_part_with_shares_that_add_to_one(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first", "--limit", "2",
                 "--quiet", "--no-cache", "--out", str(out)]) == 0
    episodes = load(out)["episodes"]
    table = time_breakdown(episodes)
    assert list(table["part"][:len(PARTS)]) == list(PARTS.values())
    assert abs(table["share"].sum() - 1) < 1e-6
    walls = episodes["wall_s"].sum()
    assert abs(table["seconds"][:len(PARTS)].sum() - walls) < 0.01 * len(episodes) + 0.01
    capsys.readouterr()
    assert main(["show", str(out), "--time"]) == 0
    printed = capsys.readouterr().out
    assert "model compute" in printed and "environment steps" in printed and "set-up" in printed


def test_a_run_from_before_the_breakdown_says_so(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:look", "--limit", "1", "--quiet",
                 "--out", str(out)]) == 0
    db = sqlite3.connect(out / "run.sqlite")
    db.execute("UPDATE episodes SET extra=?", (json.dumps({}),))
    db.commit()
    db.close()
    assert time_breakdown(load(out)["episodes"]) is None
    assert main(["show", str(out), "--time"]) == 0
    assert "not recorded" in capsys.readouterr().out


def test_a_jit_run_lists_the_time_spent_choosing_its_harnesses(tmp_path, capsys):
    out = tmp_path / "jit"
    assert main(["jit", "--suite", "toy", "--limit", "2", "--mode", "streaming", "--generator", "compose",
                 "--backbone", "scripted:pick-hash", "--no-cache", "--out", str(out)]) == 0
    episodes = load(out)["episodes"]
    table = time_breakdown(episodes).set_index("part")
    choose = sum(json.loads(x)["choose_s"] for x in episodes["extra"])
    assert choose > 0 and abs(table.loc[OUTSIDE["choose_s"], "seconds"] - choose) < 1e-9
    assert abs(table["share"].dropna().sum() - 1) < 1e-6
    capsys.readouterr()
    assert main(["show", str(out), "--time"]) == 0
    assert "JIT: choosing the harness" in capsys.readouterr().out
