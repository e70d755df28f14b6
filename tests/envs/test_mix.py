"""Mixed streams (jitlab/envs/mix.py): ``mix:toy+dbbench`` interleaves the parts' tasks in proportion, keys each
family by (suite, family), hands each task to its own suite's environment; a spec file sets counts per part and
split and a seeded order; bad input is one line before anything is written; runs of a mix name each task's source
suite and family in ``jitlab show``, the card and ``jitlab compare``, and pair across orders."""
from pathlib import Path

import pytest

from jitlab.card import compute_card, format_card
from jitlab.cli import main
from jitlab.compare import compare_runs
from jitlab.envs.base import SUITES, get_suite, suite_version
from jitlab.envs.mix import family_label, source_of
from jitlab.envs.toy import ToySuite
from jitlab.errors import ConfigError
from jitlab.store import load

MIX = "mix:toy+dbbench"


class Twin(ToySuite):
    """A second toy suite under another name whose task ids are toy's: a mix of the two is refused."""
    name = "twin"


def test_a_mix_interleaves_its_parts_in_proportion_and_keys_families_by_suite():
    mix, toy, db = get_suite(MIX), get_suite("toy"), get_suite("dbbench")
    tasks = mix.tasks("dev")
    assert len(tasks) == len(toy.tasks("dev")) + len(db.tasks("dev"))     # 10 + 57
    assert {t.id for t in tasks} == {t.id for t in toy.tasks("dev")} | {t.id for t in db.tasks("dev")}
    # toy task i sits at (i + 0.5) / 10, dbbench task j at (j + 0.5) / 57: the first toy task is 4th (after 3 dbbench)
    assert [t.suite for t in tasks[:5]] == ["dbbench", "dbbench", "dbbench", "toy", "dbbench"]
    assert [t.id for t in tasks if t.suite == "toy"] == [t.id for t in toy.tasks("dev")]   # each part keeps its order
    assert [t.suite for t in tasks[:20]].count("toy") == 3       # a --limit slice is in proportion: 20 * 10/67 = 3.0
    assert tasks[3].family == "toy/chain" and "dbbench/other" in mix.families and "other" not in mix.families
    assert mix.splits == ["dev", "test", "train"] and mix.version == "toy=1+dbbench=1" == suite_version(MIX)
    assert mix.reset_varies and not hasattr(mix, "oracle")        # toy has no oracle: the mix has none
    assert [t.id for t in mix.tasks("dev", "toy/chain")] == [t.id for t in toy.tasks("dev")]
    env = mix.make_env(tasks[3])                                  # the part's own environment, own family
    assert type(env).__name__ == "ToyEnv" and env.spec.family == "chain" and env.spec.tools[0].name == "act"
    assert {c.name for c in mix.make_env(tasks[0]).spec.tools} == {"execute_sql", "commit_answer"}
    assert source_of("dbbench/other") == ("dbbench", "other") and source_of("chain", "toy") == ("toy", "chain")
    assert family_label("toy", "chain") == "toy/chain"


def test_a_shuffle_is_the_same_tasks_in_a_seeded_order():
    base = [t.id for t in get_suite(MIX).tasks("dev")]
    one, again, two = ([t.id for t in get_suite(f"{MIX}@{s}").tasks("dev")] for s in (1, 1, 2))
    assert sorted(one) == sorted(base) == sorted(two) and one == again and len({tuple(base), tuple(one), tuple(two)}) == 3


def test_a_spec_file_sets_counts_per_part_and_split_and_an_order(tmp_path):
    spec = tmp_path / "mix.yaml"
    spec.write_text("parts:\n  toy: {test: 2}\n  dbbench: {test: 4, dev: 3}\nshuffle: 5\n")
    mix = get_suite(f"mix:{spec}")
    test = mix.tasks("test")
    want = {t.id for t in get_suite("toy").tasks("test")[:2]} | {t.id for t in get_suite("dbbench").tasks("test")[:4]}
    assert {t.id for t in test} == want and len(test) == 6
    assert len(mix.tasks("dev")) == 10 + 3                         # toy names no dev count: all its dev tasks
    spec.write_text("parts:\n  toy: {test: 2}\n  dbbench: {test: 4, dev: 3}\n")
    assert [t.suite for t in get_suite(f"mix:{spec}").tasks("test")] == ["dbbench", "toy", "dbbench", "dbbench",
                                                                         "toy", "dbbench"]   # no shuffle: interleaved


def test_a_split_a_part_lacks_can_be_served_by_a_slice_of_another_of_its_splits(tmp_path):
    spec = tmp_path / "mix.yaml"   # neither has a holdout: dbbench's test tasks 50.. (first-50 rows never touch them)
    spec.write_text("parts:\n  toy: {test: 2, holdout: {from: train, count: 3}}\n"
                    "  dbbench: {test: 3, holdout: {from: test, offset: 50, count: 4}}\n")
    mix, toy, db = get_suite(f"mix:{spec}"), get_suite("toy"), get_suite("dbbench")
    assert "holdout" in mix.splits and "holdout" not in db.splits + toy.splits
    held = mix.tasks("holdout")
    assert [t.id for t in held if t.suite == "dbbench"] == [t.id for t in db.tasks("test")[50:54]]
    assert [t.id for t in held if t.suite == "toy"] == [t.id for t in toy.tasks("train")[:3]]
    assert not {t.id for t in held} & {t.id for t in mix.tasks("test")}
    assert {t.split for t in held} == {"test", "train"}   # each task keeps its part's split, as the part lists it
    spec.write_text("parts:\n  toy: {holdout: {from: dev, offset: 8}}\n  dbbench: {holdout: {from: dev, count: 2}}\n")
    dev = [t.id for t in toy.tasks("dev")], [t.id for t in db.tasks("dev")]
    assert [t.id for t in get_suite(f"mix:{spec}").tasks("holdout")] == [dev[0][8], dev[1][0], dev[0][9], dev[1][1]]


@pytest.mark.parametrize("text, needle", [
    ("parts: [toy, dbbench]\n", "expected a mapping with 'parts'"),
    ("parts:\n  toy:\n", "expected a mapping with 'parts'"),
    ("parts:\n  toy:\n  dbbench:\norder: 1\n", "unknown key(s) 'order'"),
    ("parts:\n  toy: {test: 0}\n  dbbench:\n", "part 'toy' must map each split to a count >= 1"),
    ("parts:\n  toy: 3\n  dbbench:\n", "part 'toy' must map each split to a count >= 1"),
    ("parts:\n  toy:\n  dbbench:\nshuffle: -1\n", "shuffle must be a whole number >= 0"),
    ("parts: {toy: [\n", "not valid YAML"),
    ("parts:\n  toy: {test: 11}\n  dbbench:\n", "11 test tasks of toy asked, it has 10"),
    ("parts:\n  toy: {holdout: {from: dev}}\n  dbbench:\n", "names split 'holdout', which part dbbench has not; give"),
    ("parts:\n  toy: {holdout: 1}\n  dbbench:\n", "part toy takes holdout tasks from split 'holdout'; it has dev,"),
    ("parts:\n  toy:\n  dbbench: {holdout: {from: nosuch}}\n", "takes holdout tasks from split 'nosuch'"),
    ("parts:\n  toy:\n  dbbench: {test: {offset: 180, count: 10}}\n", "10 test tasks from task 180 of dbbench asked"),
    ("parts:\n  toy:\n  dbbench: {test: {offset: 190}}\n", "test tasks from task 190 of dbbench asked"),
    ("parts:\n  toy:\n  dbbench: {test: {start: 1}}\n", "or to a slice {from: test, offset: 50, count: 50}"),
    ("parts:\n  toy:\n  dbbench: {test: {offset: -1}}\n", "or to a slice"),
    ("parts:\n  toy:\n  nosuch:\n", "unknown suite 'nosuch'"),
])
def test_a_bad_spec_file_is_one_clear_error(tmp_path, text, needle):
    spec = tmp_path / "mix.yaml"
    spec.write_text(text)
    with pytest.raises(ConfigError) as err:
        get_suite(f"mix:{spec}")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_bad_mix_names_are_one_clear_error(monkeypatch):
    monkeypatch.setitem(SUITES, "twin", f"{__name__}:Twin")
    for name, needle in [("mix:toy", "two or more suites"), ("mix:toy+toy", "part 'toy' is named twice"),
                         ("mix:toy+nosuch", "mix:toy+nosuch: unknown suite 'nosuch'; available:"),
                         ("mix:toy+dbbench@x", "shuffle seed after '@' must be a whole number"),
                         ("mix:toy+twin", "task id 'toy-dev-0' is in both toy and twin"),
                         ("mix:toy+jitlab.envs.toy:ToySuite", "are both suite 'toy'"),
                         ("mix:missing.yaml", "mix spec missing.yaml: cannot read it")]:
        with pytest.raises(ConfigError) as err:
            get_suite(name).tasks("dev")
        assert needle in str(err.value), (name, str(err.value))


def test_bad_mix_on_the_command_line_is_one_line_and_writes_nothing(tmp_path, capsys):
    for suite, needle in [("mix:toy+nosuch", "unknown suite 'nosuch'"), (f"mix:{tmp_path / 'none.yaml'}", "cannot read")]:
        for argv in (["run", "--harness", "react"], ["jit", "--mode", "streaming"]):
            out = tmp_path / "out"
            rc = main([*argv, "--suite", suite, "--backbone", "scripted:pick-first", "--out", str(out)])
            err = capsys.readouterr().err.strip()
            assert rc == 2 and len(err.splitlines()) == 1 and needle in err, err
            assert not out.exists()


def _run(tmp_path, name, suite=MIX, harness="react", backbone="scripted:pick-first", limit=6) -> Path:
    out = tmp_path / name
    assert main(["run", "--suite", suite, "--harness", harness, "--backbone", backbone, "--limit", str(limit),
                 "--no-cache", "--quiet", "--out", str(out)]) == 0
    return out


def test_runs_of_a_mix_name_each_tasks_source_suite_and_family(tmp_path, capsys):
    out = _run(tmp_path, "react")
    eps = load(out)["episodes"]
    assert list(eps["family"]) == [t.family for t in get_suite(MIX).tasks("dev")[:6]]
    assert "toy/chain" in set(eps["family"])
    card = compute_card(load(out))
    assert card["tasks_by_suite"] == {"dbbench": 5, "toy": 1}
    assert "tasks by source suite: dbbench 5, toy 1" in format_card(card)
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "dbbench/counting" in shown and "by source suite and family" in shown
    assert main(["export", str(out), "--out", str(tmp_path / "export")]) == 0
    assert list(load(tmp_path / "export" / "react")["episodes"]["family"]) == list(eps["family"])


def test_compare_pairs_two_orders_of_a_mix_and_names_the_flipped_tasks_families(tmp_path):
    ordered = _run(tmp_path, "ordered", limit=67)
    shuffled = _run(tmp_path, "shuffled", suite=f"{MIX}@3", backbone="scripted:pick-hash", limit=67)
    table, flips, _ = compare_runs([ordered, shuffled])
    assert table["n_tasks"].iloc[0] == 67
    assert len(flips) and all("/" in f for f in flips["family"])
    first = flips.iloc[0]
    assert f"{first['task_id']}#0 ({first['family']}) " in table["flipped"].iloc[0]
    with pytest.raises(ConfigError, match="different suite"):
        compare_runs([ordered, _run(tmp_path, "toy", suite="toy", limit=6)])


def test_the_oracle_of_a_mix_is_each_tasks_own_suites(tmp_path, capsys):
    assert hasattr(get_suite("mix:dbbench+babyai"), "oracle")
    out = _run(tmp_path, "oracle", suite="mix:dbbench+babyai", harness="oracle", limit=4)
    eps = load(out)["episodes"]
    assert eps["success"].sum() == 4 and {f.partition("/")[0] for f in eps["family"]} == {"dbbench", "babyai"}
    capsys.readouterr()
    assert main(["suites"]) == 0 and "mix:..." in capsys.readouterr().out
