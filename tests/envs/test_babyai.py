"""Tests of the BabyAI suite: task listing, the text renderer, reset/step/score and the BabyAIBot oracle.
The default tests play a handful of episodes (well under a second each) and the oracle on every dev, test and
train task; no test plays a holdout episode (its seeds are checked by arithmetic only)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from jitlab.envs.babyai import COMMANDS, LEVELS, MISSIONS, BabyAIConfig, BabyAISuite, gym_seed, quiet, render
from jitlab.envs.base import get_suite
from jitlab.errors import UnknownName
from jitlab.runtime import Budget, LLMHandle, run_episode


@pytest.fixture(scope="module")
def suite():
    return get_suite("babyai")


def _task(suite, family, split="dev", index=0):
    return suite.tasks(split, family)[index]


def test_splits_are_disjoint_and_cover_every_level(suite):
    dev, test = suite.tasks("dev"), suite.tasks("test")
    assert len(LEVELS) >= 6 and len(dev) == len(test) == 10 * len(LEVELS)
    assert {t.family for t in dev} == set(LEVELS)
    assert not {t.data["seed"] for t in dev} & {t.data["seed"] for t in test}
    assert {t.family for t in dev[: len(LEVELS)]} == set(LEVELS)  # --limit N sees every level first
    spec = dev[0]
    assert "act(command)" in spec.description and "Success" in spec.description
    assert str(spec.data["seed"]) not in spec.description
    # the description holds for every reset seed: the level's kind of mission, not one episode's
    assert MISSIONS[spec.family] in spec.description
    env = suite.make_env(spec)
    mission = env.reset().text.splitlines()[0].removeprefix("Mission: ").rstrip(".")
    assert mission not in spec.description
    env.close()


def test_unknown_split_and_family_name_the_choices(suite):
    with pytest.raises(UnknownName, match="available: dev, holdout, test, train"):
        suite.tasks("valid")
    with pytest.raises(UnknownName, match="GoToLocal"):
        suite.tasks("dev", family="MazeOfDoom")
    with pytest.raises(ValueError, match="overlap"):
        BabyAISuite(BabyAIConfig(per_split=10, dev_seed=0, test_seed=5))
    with pytest.raises(ValueError, match="train seeds meet dev or test seeds modulo the stride 2010"):
        BabyAISuite(BabyAIConfig(train_seed=1000 + 2 * 2010))   # dev's residues: dev episodes at reset seed 2
    with pytest.raises(ValueError, match="holdout_reset_seed must be >= 1"):
        BabyAISuite(BabyAIConfig(holdout_reset_seed=0))


def test_render_names_mission_objects_front_and_carried():
    from minigrid.core.world_object import Key
    image = np.zeros((7, 7, 3), dtype=np.uint8)
    image[:, :, 0] = 1                      # empty floor everywhere
    image[3, 5] = (6, 0, 0)                 # red ball directly in front of the agent (3, 6)
    image[1, 3] = (4, 4, 2)                 # locked yellow door: 3 ahead, 2 to the left
    image[3, 1] = (2, 5, 0)                 # wall 5 steps ahead
    text = render(image, "pick up the red ball", Key("blue"))
    assert "Mission: pick up the red ball." in text
    assert "a red ball 1 step ahead" in text
    assert "a locked yellow door 3 steps ahead and 2 steps to the left" in text
    assert "Directly in front of you: a red ball." in text
    assert "You are carrying: a blue key." in text
    assert "You are carrying: nothing." in render(image, "m", None)


def test_reset_step_score_and_carrying(suite):
    env = suite.make_env(_task(suite, "PickupLoc"))
    obs = env.reset()
    assert obs.text.startswith("Mission: pick up") and obs.candidates == COMMANDS and not obs.done
    again = suite.make_env(_task(suite, "PickupLoc"))
    assert again.reset().text == obs.text              # the task's seed fixes the episode
    bad = env.step("act", {"command": "fly"})
    assert "Invalid action" in bad.text and env.steps == 0
    turned = env.step("act", {"command": "turn left"})
    assert turned.text.startswith("You turn left.") and env.steps == 1
    assert env.score().success is False
    # the bot picks the object up; the observation must then say what is carried
    from minigrid.utils.baby_ai_bot import BabyAIBot
    env.reset()
    bot, obs = BabyAIBot(env.gym), None
    while obs is None or not obs.done:
        obs = env.step("act", {"command": COMMANDS[int(bot.replan())]})
    carried = env.unwrapped.carrying
    assert carried is not None and f"You are carrying: a {carried.color} {carried.type}." in obs.text
    assert env.score().success and obs.reward > 0
    env.close()


def test_done_is_not_an_action(suite):
    """minigrid's `done` is a no-op and BALROG's BabyAI-Text leaves it out: it must not end the episode."""
    assert COMMANDS == ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
    assert "done" not in suite.tasks("dev")[0].tools[0].args["properties"]["command"]["enum"]
    env = suite.make_env(_task(suite, "GoToLocal"))
    start = env.reset().text
    obs = env.step("act", {"command": "done"})
    assert not obs.done and env.steps == 0 and "'done' is not an action" in obs.text
    assert obs.text.endswith(start)                 # nothing happened
    assert not env.step("act", {"command": "go forward"}).done and env.steps == 1
    assert env.score().success is False and env.score().reward == 0.0
    env.close()


def test_the_reset_seed_picks_the_layout(suite):
    spec = _task(suite, "GoToLocal")
    env, other = suite.make_env(spec), suite.make_env(spec)

    def layout(e):
        return e.unwrapped.grid.encode().tobytes(), tuple(e.unwrapped.agent_pos), e.unwrapped.agent_dir

    first = env.reset(seed=0)
    assert env.score().info["env_seed"] == spec.data["seed"]        # seed 0 is the task's own episode
    at_zero = layout(env)
    one = env.reset(seed=1)
    at_one = layout(env)
    assert at_one != at_zero and one.text != first.text              # another seed, another layout
    assert other.reset(seed=1).text == one.text and layout(other) == at_one   # the same seed, the same episode
    assert env.reset(seed=0).text == first.text and layout(env) == at_zero
    # the same moves from the same seed give the same episode
    moves = ["turn left", "go forward", "go forward", "turn right", "go forward"]
    runs = []
    for e in (env, other):
        e.reset(seed=3)
        runs.append([e.step("act", {"command": m}).text for m in moves])
    assert runs[0] == runs[1]
    env.close(), other.close()


def test_train_and_holdout_have_dev_shape_and_ids_of_their_own(suite):
    by_split = {split: suite.tasks(split) for split in suite.splits}
    assert list(by_split) == ["dev", "test", "train", "holdout"]
    shape = {split: [t.family for t in tasks] for split, tasks in by_split.items()}
    assert all(v == shape["dev"] for v in shape.values())                    # same levels, same order
    every = [t for tasks in by_split.values() for t in tasks]
    assert len({t.id for t in every}) == len({(t.family, t.data["seed"]) for t in every}) == len(every) == 4 * 70
    assert all(t.split == split for split, tasks in by_split.items() for t in tasks)
    assert [t.data["seed"] for t in by_split["train"][:: len(LEVELS)]] == list(range(3000, 3010))
    # the holdout's own episode is the test task's at reset seed 9, with the test task's level and budget
    for held, test in zip(by_split["holdout"], by_split["test"]):
        assert gym_seed(held) == gym_seed(test, 9) and (held.family, held.max_steps) == (test.family, test.max_steps)
        assert held.description == test.description and held.id != test.id
    again = BabyAISuite()
    assert [(t.id, t.data) for t in again.tasks("train")] == [(t.id, t.data) for t in by_split["train"]]


def test_no_reset_seed_gives_one_split_anothers_episode(suite):
    # an episode is (level, gym seed): every split's, at reset seeds 0..50
    seeds = {split: {(t.family, gym_seed(t, s)): (t.id, s) for t in suite.tasks(split) for s in range(51)}
             for split in suite.splits}
    assert all(len(v) == 70 * 51 for v in seeds.values())
    for a in ("dev", "test", "train"):
        for b in ("dev", "test", "train", "holdout"):
            if a != b and {a, b} != {"test", "holdout"}:
                assert not seeds[a].keys() & seeds[b].keys(), (a, b)
    # holdout and test meet only where the holdout is defined: holdout at reset k is test at reset 9 + k
    shared = seeds["test"].keys() & seeds["holdout"].keys()
    assert {seeds["test"][g][1] - seeds["holdout"][g][1] for g in shared} == {9}
    assert all(seeds["test"][g][1] >= 9 for g in shared)
    # dev and test gym seeds are what they were before train existed (committed results depend on them)
    assert suite.seed_stride == 2010
    assert {gym_seed(t) for t in suite.tasks("dev")} == set(range(1000, 1010))
    assert {gym_seed(t, 50) for t in suite.tasks("test")} == {g + 50 * 2010 for g in range(2000, 2010)}


def test_a_train_episode_plays_and_replays(suite):
    spec = _task(suite, "GoToLocal", split="train")
    env, other = suite.make_env(spec), suite.make_env(spec)
    assert env.reset().text == other.reset().text and env.score().info["env_seed"] == 3000
    assert env.step("act", {"command": "turn left"}).text == other.step("act", {"command": "turn left"}).text
    env.close(), other.close()


def test_reset_seeds_never_give_one_split_the_others_episodes(suite):
    dev, test = suite.tasks("dev"), suite.tasks("test")
    dev_seeds = {gym_seed(t, s) for t in dev for s in range(50)}
    test_seeds = {gym_seed(t, s) for t in test for s in range(50)}
    assert len(dev_seeds) == len({t.data["seed"] for t in dev}) * 50 and not dev_seeds & test_seeds
    with pytest.raises(ValueError, match=">= 0"):
        gym_seed(dev[0], -1)


@pytest.mark.parametrize("family", ["GoToLocal", "PutNextLocal", "UnlockLocal", "GoToSeqS5R2"])
def test_oracle_wins(suite, family):
    spec = _task(suite, family)
    env = suite.make_env(spec)
    result = run_episode(env, suite.oracle(env), LLMHandle(None), Budget())
    assert result.status == "ok" and result.success and 0 < result.reward <= 1
    assert result.steps <= spec.max_steps


def _oracle_wins(suite, split, seed):
    wins = 0
    specs = suite.tasks(split)
    for spec in specs:
        env = suite.make_env(spec)
        result = run_episode(env, suite.oracle(env), LLMHandle(None), Budget(), seed=seed)
        wins += result.success and result.steps <= spec.max_steps
        env.close()
    return wins, len(specs)


@pytest.mark.parametrize("split", ["dev", "test", "train"])
@pytest.mark.parametrize("seed", [0, 1])
def test_oracle_solves_every_task(suite, split, seed):
    # about half a second per split: BabyAIBot within the suite's step budgets, without `done`
    wins, total = _oracle_wins(suite, split, seed)
    assert wins == total


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4, 5])
def test_oracle_solves_every_task_at_more_seeds(suite, seed):
    for split in ("dev", "test"):
        wins, total = _oracle_wins(suite, split, seed)
        assert wins == total, (split, seed)


def test_quiet_drops_only_its_own_threads_prints(capsys):
    # two threads inside quiet() at once, leaving in the wrong order: redirect_stdout left sys.stdout on a StringIO
    entered, leave_first = threading.Barrier(3), threading.Event()

    def silent(first: bool):
        with quiet():
            entered.wait()
            print("dropped")
            if not first:
                leave_first.wait()
        if first:
            leave_first.set()

    threads = [threading.Thread(target=silent, args=(first,)) for first in (True, False)]
    for t in threads:
        t.start()
    entered.wait()
    print("kept while they are quiet")
    for t in threads:
        t.join()
    print("kept after")
    assert capsys.readouterr().out == "kept while they are quiet\nkept after\n"
