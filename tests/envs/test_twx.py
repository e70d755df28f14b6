"""Tests of the TextWorldExpress suite (jitlab/envs/twx.py). Listing tasks starts no JVM; the default tests start
five (one shared by the game tests, one for close(), two for the runner's episodes, one in a child process), ~0.7 s
each; the slow test plays the gold path of every task of every split."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from jitlab.cli import main as cli_main
from jitlab.envs.base import get_suite
from jitlab.envs.twx import BUDGETS, GAMES, SPLITS, TwxConfig, TwxEnv, TwxSuite, gold_check, main
from jitlab.errors import ConfigError, UnknownName
from jitlab.runtime import Budget, LLMHandle, run_episode
from jitlab.store import load

FAMILIES = ["coin", "mapreader", "sorting", "arithmetic", "twc", "cookingworld"]


def _java_children(pid: int | None = None) -> list[int]:
    """Running (not zombie) java processes whose parent is ``pid`` (default: this process), found through /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "java" and rest[0] != "Z" and int(rest[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def suite():
    return TwxSuite()


@pytest.fixture(scope="module")
def env(suite):
    """One env (one JVM) shared by the game tests: each test points it at its task's spec and resets."""
    env = suite.make_env(suite.tasks("dev")[0])
    yield env
    env.close()


def _play(env, spec):
    env.spec = spec
    return env.reset()


def test_splits_are_disjoint_deterministic_interleaved_and_hide_answers(suite):
    assert suite.families == FAMILIES == list(GAMES) == list(BUDGETS)
    assert suite.splits == ["dev", "test", "train", "holdout"]
    by_split = {split: suite.tasks(split) for split in suite.splits}
    assert {split: len(tasks) for split, tasks in by_split.items()} == {s: 36 for s in suite.splits}
    every = [t for tasks in by_split.values() for t in tasks]
    assert len({t.id for t in every}) == len({t.data["seed"] for t in every}) == len(every) == 144
    assert [t.family for t in by_split["dev"][:12]] == FAMILIES * 2               # interleaved by family
    folds = {"dev": range(10_000, 11_000), "test": range(20_000, 21_000), "train": range(0, 1000)}
    for split, tasks in by_split.items():
        fold = SPLITS[split][0]
        assert {t.data["fold"] for t in tasks} == {fold} and {t.split for t in tasks} == {split}
        assert all(t.data["seed"] in folds[fold] and f"-{split}-" in t.id for t in tasks)
        assert {t.family: t.max_steps for t in tasks} == BUDGETS
    test_seeds, holdout_seeds = ({t.data["seed"] for t in by_split[s]} for s in ("test", "holdout"))
    assert max(test_seeds) < min(holdout_seeds)                                   # same fold, disjoint seed ranges
    again = TwxSuite()
    assert [(t.id, t.data) for t in again.tasks("holdout")] == [(t.id, t.data) for t in by_split["holdout"]]
    assert len(TwxSuite(TwxConfig(games_per_family=2)).tasks("dev", "twc")) == 2
    public = by_split["dev"][0].public()
    text = str(public)
    assert "data" not in public and "act(command)" in public["description"] and public["tools"][0]["name"] == "act"
    assert f"Budget: at most {BUDGETS['coin']} commands" in public["description"]
    assert not any(str(t.data["seed"]) in str(t.public()) for t in every if t.split != "train")   # train's are 0..
    assert "gold" not in text.lower() and "seed" not in text.lower()
    assert get_suite("twx").name == "twx" and _java_children() == []              # listing starts no JVM


def test_bad_split_family_and_config_are_one_line_errors(suite):
    with pytest.raises(UnknownName, match="unknown split 'valid'; available: dev, holdout, test, train"):
        suite.tasks("valid")
    with pytest.raises(UnknownName, match="unknown family 'zork'.*coin"):
        suite.tasks("dev", family="zork")
    with pytest.raises(ConfigError, match="--games-per-family must be <= 50"):
        TwxConfig(games_per_family=51)


def test_every_familys_gold_path_solves_its_game_through_the_env(suite, env):
    for family in FAMILIES:
        spec = suite.tasks("dev", family)[0]
        obs = _play(env, spec)
        assert obs.text and obs.candidates == sorted(obs.candidates) and not obs.done
        assert env._sim.getGenerationProperties()["seed"] == spec.data["seed"]
        gold = env.gold_actions()
        assert gold and len(gold) <= spec.max_steps, family
        assert not any(command in obs.text for command in gold[1:] if len(command.split()) > 2), "no gold in the text"
        total = 0.0
        for i, command in enumerate(gold):
            assert command in obs.candidates, (family, command)                    # the gold path is admissible
            obs = env.step("act", {"command": command})
            total += obs.reward
            assert obs.done == (i == len(gold) - 1), (family, i)
        score = env.score()
        assert score.success and score.reward == 1.0 and abs(total - 1.0) < 1e-9, (family, score)
        assert obs.candidates == [] and obs.info["won"] and set(obs.info) == {"score", "moves", "won", "lost"}


def test_invalid_commands_give_observations_not_crashes(suite, env):
    spec = suite.tasks("dev", "coin")[0]
    obs = _play(env, spec)
    assert obs.text.startswith("Your task is to search the environment and find the coin")   # the game's task first
    assert "take coin" in obs.candidates
    for command in ("dance wildly", "put the moon in the box", "help me"):
        obs = env.step("act", {"command": command})
        assert "not sure what you mean" in obs.text and not obs.done and obs.reward == 0 and obs.candidates
    assert "act(command)" in env.step("shout", {"text": "hi"}).text
    assert "Empty command" in env.step("act", {"command": "   "}).text
    assert env.score().success is False and env.score().reward == 0.0
    obs = env.step("act", {"command": "  Take   COIN "})                           # case and spaces: the admissible one
    assert obs.done and obs.reward == 1.0 and env.score().success
    assert env.step("act", {"command": "look around"}).text == "The game is over."
    obs = _play(env, suite.tasks("dev", "sorting")[0])                             # a lost game: reward 0, not -1
    gold = env.gold_actions()
    env.step("act", {"command": gold[-2]})
    obs = env.step("act", {"command": gold[-1]})                                   # the largest first: out of order
    score = env.score()
    assert obs.done and obs.info["lost"] and not score.success and score.reward == 0.0 and score.info["score"] < 0


def test_oracle_wins_through_the_runtime(suite, env):
    for family in ("mapreader", "cookingworld"):
        env.spec = suite.tasks("dev", family)[1]
        result = run_episode(env, suite.oracle(env), LLMHandle(backbone=None), Budget())
        assert result.status == "ok" and result.success and result.reward == 1.0, (family, result)


def test_close_ends_the_jvm_and_a_never_reset_env_has_none(suite):
    spec = suite.tasks("dev", "twc")[0]
    idle = suite.make_env(spec)
    assert idle.java_pid() is None
    idle.close()
    env = suite.make_env(spec)
    env.reset()
    pid = env.java_pid()
    assert pid in _java_children() and _alive(pid)
    env.close()
    assert env.java_pid() is None and not _alive(pid)                             # close() waits for the exit
    env.close()                                                                  # twice is fine


_ORPHAN = """
import sys, time
from jitlab.envs.twx import TwxSuite
suite = TwxSuite()
env = suite.make_env(suite.tasks("dev")[0])
env.reset()
print(env.java_pid(), flush=True)
time.sleep(60)
"""


def test_a_killed_run_leaves_no_jvm():
    child = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        pid = int(child.stdout.readline())
        assert _alive(pid)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        deadline = time.time() + 5                      # the JVM exits when its stdin (the dead parent's pipe) closes
        while time.time() < deadline and _alive(pid):
            time.sleep(0.05)
        left = _alive(pid)
        if left:
            os.kill(pid, signal.SIGKILL)
        assert not left, "the JVM outlived its killed parent"
    finally:
        if child.poll() is None:
            child.kill()


def test_a_react_run_through_the_runner_with_a_scripted_backbone(tmp_path):
    out, before = tmp_path / "run", set(_java_children())   # the shared env's JVM may be running
    assert cli_main(["run", "--suite", "twx", "--split", "dev", "--limit", "2", "--concurrency", "2", "--harness",
                     "react", "--backbone", "scripted:pick-first", "--no-cache", "--quiet", "--out", str(out)]) == 0
    eps = load(out)["episodes"]   # in the order the two episodes finished
    assert sorted(eps["family"]) == ["coin", "mapreader"] and set(eps["status"]) == {"ok"}
    assert sorted(eps["task_id"]) == sorted(t.id for t in TwxSuite().tasks("dev")[:2])
    assert set(_java_children()) <= before                                       # every episode's JVM closed


def test_a_mixed_stream_with_twx_builds():
    mix = get_suite("mix:textworld+babyai+dbbench+twx")
    tasks = mix.tasks("dev")
    twx = [t for t in tasks if t.suite == "twx"]
    assert [t.id for t in twx] == [t.id for t in TwxSuite().tasks("dev")] and "twx/cookingworld" in mix.families
    assert twx[0].family == "twx/coin" and "holdout" not in mix.splits and "twx=1" in mix.version
    env = mix.make_env(twx[0])
    assert isinstance(env, TwxEnv) and env.spec.family == "coin" and env.java_pid() is None
    env.close()


def test_the_command_line_lists_tasks(capsys):
    assert main(["list", "--split", "holdout"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 36 and all(line.startswith("twx-") and " test 20" in line for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "test", "holdout", "train"])
def test_gold_paths_solve_every_task(split):
    rows = gold_check(split)
    assert all(row["won"] == row["tasks"] == 6 and row["longest_gold"] <= row["budget"] for row in rows.values()), rows
