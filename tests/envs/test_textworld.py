"""Tests of the TextWorld suite. The default tests generate two small games (~5 s each) into a
temporary cache and regenerate one of them; the slow test generates and plays every dev game."""
from __future__ import annotations

import contextlib
import hashlib
import logging
import threading

import pytest

from jitlab.envs.base import get_suite
from jitlab.envs.textworld import TextWorldConfig, TextWorldSuite, main, prepare
from jitlab.errors import UnknownName
from jitlab.runtime import Budget, LLMHandle, run_episode

# textworld itself silences this jericho warning (its own admissible-command tracker replaces jericho's);
# pytest resets warning filters, so silence it here too
pytestmark = pytest.mark.filterwarnings("ignore:Unable to find valid actions in an unsupported game")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return TextWorldSuite(TextWorldConfig(data_dir=str(tmp_path_factory.mktemp("tw"))))


def _task(suite, family, level, split="dev", index=0):
    return next(t for t in suite.tasks(split, family) if t.data["level"] == level and t.id.endswith(f"-{index:02d}"))


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_unknown_split_and_family_name_the_choices(suite):
    with pytest.raises(UnknownName, match="unknown split 'valid'; available: dev, holdout, test, train"):
        suite.tasks("valid")
    with pytest.raises(UnknownName, match="unknown family 'zork'.*coin_collector"):
        suite.tasks("dev", family="zork")
    with pytest.raises(UnknownName, match="unknown split 'valid'"):
        prepare("valid", suite=suite)                          # refused before any game is generated
    assert not list(suite.cache.games.glob("*.z8"))


def test_every_split_has_the_same_shape_and_shares_no_seed_or_id(suite):
    assert suite.splits == ["dev", "test", "train", "holdout"]
    by_split = {split: suite.tasks(split) for split in suite.splits}
    shape = {split: sorted((t.family, t.data["level"]) for t in tasks) for split, tasks in by_split.items()}
    assert len({tuple(v) for v in shape.values()}) == 1 and len(shape["dev"]) == 36
    every = [t for tasks in by_split.values() for t in tasks]
    assert len({t.id for t in every}) == len({t.data["seed"] for t in every}) == len(every) == 4 * 36
    for split, tasks in by_split.items():
        assert {t.split for t in tasks} == {split} and all(f"-{split}-" in t.id for t in tasks)
        assert all(t.data["argv"][-2:] == ["--seed", str(t.data["seed"])] for t in tasks)
    ranges = {split: (min(t.data["seed"] for t in ts), max(t.data["seed"] for t in ts)) for split, ts in by_split.items()}
    assert ranges["train"][0] >= 30_000 and ranges["holdout"][0] >= 40_000
    spans = sorted(ranges.values())
    assert all(hi < lo for (_, hi), (lo, _) in zip(spans, spans[1:])), spans
    # dev and test are what they were before train and holdout existed (committed results depend on them)
    assert [t.data["seed"] for t in by_split["dev"][:3]] == [10_100, 10_300, 10_500]
    assert [t.data["seed"] for t in by_split["test"][:3]] == [20_100, 20_300, 20_500]
    again = TextWorldSuite(TextWorldConfig(data_dir=str(suite.cache.root)))
    assert [(t.id, t.data["argv"]) for t in again.tasks("train")] == [(t.id, t.data["argv"]) for t in by_split["train"]]
    assert not list(suite.cache.games.glob("*.z8")), "listing tasks must not generate games"


def test_the_command_line_takes_every_split(suite, capsys):
    assert main(["list", "--split", "train"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 36 and all(line.startswith("tw-") and "-train-" in line for line in lines)
    with pytest.raises(SystemExit):
        main(["prepare", "--split", "valid"])
    assert "invalid choice: 'valid'" in capsys.readouterr().err


def test_a_train_game_generates_and_the_oracle_wins_it(tmp_path):
    suite = TextWorldSuite(TextWorldConfig(data_dir=str(tmp_path)))   # its own cache: others list an empty one
    spec = _task(suite, "coin_collector", 1, split="train")
    env = suite.make_env(spec)
    result = run_episode(env, suite.oracle(env), LLMHandle(backbone=None), Budget())
    env.close()
    assert result.status == "ok" and result.success
    assert suite.cache.manifest()[spec.id]["argv"][-1] == str(spec.data["seed"])


def test_task_listing_is_cheap_disjoint_and_hides_answers(suite):
    dev, test = suite.tasks("dev"), suite.tasks("test")
    assert len(dev) + len(test) >= 60
    assert {t.family for t in dev} == set(suite.families) == {"coin_collector", "treasure_hunter", "cooking"}
    assert not {t.data["seed"] for t in dev} & {t.data["seed"] for t in test}
    assert len({t.id for t in dev + test}) == len(dev + test)
    assert not list(suite.cache.games.glob("*.z8")), "listing tasks must not generate games"
    public = dev[0].public()
    assert "data" not in public and "act(command)" in public["description"]
    assert str(dev[0].max_steps) in public["description"] and public["tools"][0]["name"] == "act"
    assert get_suite("textworld").name == "textworld"


def test_reset_step_score_coin_collector(suite):
    env = suite.make_env(_task(suite, "coin_collector", 1))
    obs = env.reset()
    assert "$$" not in obs.text and obs.text and not obs.done
    assert "take coin" in obs.candidates
    obs = env.step("act", {"command": "dance wildly"})       # not admissible: no progress, no crash
    assert not obs.done and env.score().success is False and env.score().reward == 0
    obs = env.step("shout", {"text": "hi"})                   # unknown tool: an error observation
    assert "act(command)" in obs.text and not obs.done
    obs = env.step("act", {"command": "take coin"})
    assert obs.done and obs.reward == 1.0 and obs.candidates == []
    score = env.score()
    assert score.success and score.reward == 1.0
    assert env.step("act", {"command": "look"}).text == "The game is over."
    env.close()


def test_oracle_wins_through_the_runtime(suite):
    for family, level in [("coin_collector", 1), ("cooking", 1)]:
        env = suite.make_env(_task(suite, family, level))
        assert env.spec.data["walkthrough"], "make_env fills the walkthrough in"
        result = run_episode(env, suite.oracle(env), LLMHandle(backbone=None), Budget())
        env.close()
        assert result.status == "ok" and result.success and result.reward == 1.0, (family, result)


def test_wrong_actions_do_not_succeed(suite):
    spec = _task(suite, "cooking", 1)
    env = suite.make_env(spec)
    obs = env.reset()
    assert "examine cookbook" in obs.candidates
    for _ in range(spec.max_steps):
        obs = env.step("act", {"command": "look" if _ % 2 else "inventory"})
    score = env.score()
    assert not obs.done and not score.success and score.reward == 0.0
    env.close()


def test_corrupt_cached_game_is_regenerated_byte_identical_once(suite, caplog):
    spec = _task(suite, "coin_collector", 1)
    game = suite.ensure(spec).data["game"]
    original = suite.cache.manifest()[spec.id]["sha256"]
    with open(game, "r+b") as fh:                               # overwrite some bytes in place
        fh.seek(1000)
        fh.write(b"\x00corrupt\x00" * 8)
    assert _sha(game) != original["z8"]
    caplog.set_level(logging.WARNING, logger="jitlab.envs.textworld")
    errors = []

    def ask():
        try:
            suite.ensure(spec)
        except Exception as exc:  # collected so the main thread fails the test
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(2)]   # two callers, one regeneration
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    warnings = [r for r in caplog.records if "regenerating" in r.getMessage()]
    assert len(warnings) == 1 and "corrupt" in warnings[0].getMessage()
    assert _sha(game) == original["z8"], "regeneration must be byte-identical (PYTHONHASHSEED=0)"
    assert suite.cache.manifest()[spec.id]["sha256"] == original
    env = suite.make_env(spec)
    assert "take coin" in env.reset().candidates
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "train"])
def test_oracle_solves_dev_split(split):
    """Generates all games of the split into the default cache (~2-3 min the first time) and plays the oracle."""
    suite = TextWorldSuite()
    wins = 0
    specs = suite.tasks(split)
    for spec in specs:
        env = suite.make_env(spec)
        result = run_episode(env, suite.oracle(env), LLMHandle(backbone=None), Budget())
        env.close()
        wins += result.success
    assert wins / len(specs) >= 0.95


def test_episodes_in_threads_can_reset_and_step_at_once(suite):
    # TextWorld's game-logic parser is module-global and not thread-safe; the env serializes calls
    from concurrent.futures import ThreadPoolExecutor
    specs = [_task(suite, "coin_collector", 1), _task(suite, "cooking", 1)] * 3

    def play(spec):
        env = suite.make_env(spec)
        try:
            obs = env.reset()
            return bool(obs.candidates) and not env.step("act", {"command": obs.candidates[0]}).text.startswith("Unknown")
        finally:
            env.close()
    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(play, specs))


# -- a killed run leaves no tw-make behind (issue 17, case 9) -------------------------------------------------
_GENERATE = """
import sys
from jitlab.envs.textworld import TextWorldConfig, TextWorldSuite, main, prepare
suite = TextWorldSuite(TextWorldConfig(data_dir=sys.argv[1]))
task = next(t for t in suite.tasks("dev", "cooking") if t.data["level"] == 3)
suite.ensure(task)
"""


def _tw_make_pids(games_dir) -> list[int]:
    """tw-make processes (and their children) working inside ``games_dir``, found through /proc."""
    import os
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(games_dir)):
            pids.append(int(entry))
    return pids


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_killing_a_run_during_generation_leaves_no_tw_make(tmp_path, how):
    import os
    import signal
    import subprocess
    import sys
    import time
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", _GENERATE, str(tmp_path)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    games = tmp_path / "games"
    deadline = time.time() + 60
    while time.time() < deadline and not _tw_make_pids(games):
        assert parent.poll() is None, "the generator ended before tw-make was seen"
        time.sleep(0.05)
    assert _tw_make_pids(games), "tw-make never started"
    time.sleep(0.5)                                    # well inside the ~5 s generation
    parent.send_signal(getattr(signal, how))
    parent.wait(timeout=30)
    deadline = time.time() + 1.5                       # a generation takes ~5 s: what is left now was orphaned
    while time.time() < deadline and _tw_make_pids(games):
        time.sleep(0.1)
    left = _tw_make_pids(games)
    for pid in left:                                   # do not leave them to the next test either
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"orphaned tw-make processes after {how}: {left}"
