"""BabyAI suite: grid-world instruction following (minigrid's BabyAI levels) rendered as text.

    from jitlab.envs import get_suite
    suite = get_suite("babyai"); spec = suite.tasks("dev", family="GoToLocal")[0]
    env = suite.make_env(spec); print(env.reset().text); env.step("act", {"command": "go forward"})

Each task is one seeded episode of one level (``BabyAI-<family>-v0``); the splits use disjoint
seed ranges (dev 1000.., test 2000.., train 3000..; holdout: see Seeds). The agent sees a text
rendering of its 7x7 egocentric view (objects with relative positions, what is directly in front, what
it carries) and acts with one tool ``act`` whose command is one of ``turn left``, ``turn right``, ``go forward``, ``pick
up``, ``drop``, ``toggle``. Success = the environment's reward is > 0 (BabyAI pays
``1 - 0.9 * steps / max_steps`` on completion); the episode ends when the mission is complete, at
the level's own step limit, or when the harness's step budget is spent.

No ``done`` command. minigrid's action set has a seventh action, ``done``, which its ``step`` treats as
a no-op (``MiniGridEnv.step``: "Done action (not used by default)"; the BabyAI verifier only looks at it
when ``BABYAI_DONE_ACTIONS`` is set), and the text interfaces LLM agents are compared on offer the six
others only (BALROG's BabyAI-Text, ``balrog/environments/babyai_text/clean_lang_wrapper.py``:
``BABYAI_ACTION_SPACE``). This suite follows BALROG and drops ``done`` from the admissible commands: a
``done`` is answered as an invalid action that changes nothing and costs no environment step. (Until
this change the suite offered ``done`` and ended the episode on it, unscored; models often sent it
first, so earlier BabyAI results are not comparable.)

Seeds. ``reset(seed)`` plays the level with gym seed ``task seed + seed * stride``, stride =
``test_seed + per_split`` (2010 by default): seed 0 is the task's own episode, another seed a different
layout and mission of the same level, the same at every reset with that seed. Every gym seed of a task is
its task seed modulo the stride, so two splits whose task seeds differ modulo the stride never meet at any
reset seed: dev (1000..1009) and test (2000..2009) as they always were, and train (3000..3009, i.e.
990..999 modulo 2010; the suite refuses a config where train's residues meet dev's or test's). The task
description therefore gives the level's kind of mission, not the episode's (which is in every observation).

Holdout. The ``holdout`` split is the test tasks at reset seed ``holdout_reset_seed`` (9), each as a task of
its own (task seed = test seed + 9 * stride, so ids such as ``babyai-GoToLocal-20090``): episodes of the test
levels never played while designing, since every committed run plays test at reset seed 0. Its reset seed k
is test's 9 + k, so the holdout stays unseen only while nobody runs test at ``--seed`` 9 or above or with a
``--repeat`` reaching 9 (``--seed 0 --repeat 9`` is the most); it shares no gym seed with dev or train.

The oracle (``BabyAISuite().oracle(env)``) is minigrid's ``BabyAIBot``; it reads the true
environment state and exists only to check that the env and the scorer agree.

Caveats: minigrid prints "Sampling rejected" while generating some levels; that output is dropped,
for the thread resetting the level only (:func:`quiet`).
"""
from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass, field

from jitlab.envs.base import Score, TaskSpec, check_choice
from jitlab.protocol import Agent, Capability, Decision, Observation

__all__ = ["ACT", "COMMANDS", "LEVELS", "MISSIONS", "BabyAIConfig", "BabyAIEnv", "BabyAIOracle", "BabyAISuite",
           "gym_seed", "quiet", "render"]

# minigrid.core.actions.Actions 0..5, in order (the index is the gym action); 6 = done is left out, see above
COMMANDS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
_ALIASES = {"left": "turn left", "right": "turn right", "forward": "go forward", "move forward": "go forward",
            "pickup": "pick up", "open": "toggle", "go left": "turn left", "go right": "turn right"}

ACT = Capability("act", "Do one action in the grid world. command is one of: " + ", ".join(COMMANDS) + ".",
                 {"type": "object", "properties": {"command": {"type": "string", "enum": COMMANDS}},
                  "required": ["command"]})

# family -> (gym id, step budget given to a harness). Budgets leave room over the bot's longest episode
# (measured over dev and test at reset seeds 0-5, in this order: 20, 16, 15, 14, 28, 25, 54 steps).
LEVELS = {
    "GoToLocal": ("BabyAI-GoToLocal-v0", 40),
    "PickupLoc": ("BabyAI-PickupLoc-v0", 40),
    "OpenDoor": ("BabyAI-OpenDoor-v0", 40),
    "GoToObjDoor": ("BabyAI-GoToObjDoor-v0", 40),
    "PutNextLocal": ("BabyAI-PutNextLocal-v0", 64),
    "UnlockLocal": ("BabyAI-UnlockLocal-v0", 64),
    "GoToSeqS5R2": ("BabyAI-GoToSeqS5R2-v0", 80),
}

# family -> the kind of mission its episodes get (after minigrid's level docstrings); the episode's own
# mission is in every observation, since it changes with the reset seed
MISSIONS = {
    "GoToLocal": "go to an object in a single room ('go to the red ball')",
    "PickupLoc": "pick up an object named by its colour and type or by its location in a single room "
                 "('pick up the blue key', 'pick up the ball in front of you')",
    "OpenDoor": "open a door of the current room named by its colour or location ('open the door on your left')",
    "GoToObjDoor": "go to an object or a door in the current room ('go to the green door')",
    "PutNextLocal": "put an object next to another in a single room ('put the red box next to the grey key')",
    "UnlockLocal": "open the locked door of the current room; its key (same colour) is in the room",
    "GoToSeqS5R2": "a sequence of go-to instructions across several rooms, joined by 'and', ', then' or "
                   "'after you' ('go to a red ball and go to the blue door, then go to a key')",
}

_DESCRIPTION = (
    "BabyAI grid world ({level}). You are an agent in a grid of rooms with walls, doors, keys, balls and "
    "boxes; you see a 7x7 area in front of you (not through walls or closed doors). Missions in this level: "
    "{mission}. The episode's mission is given in each observation. Each observation lists the visible objects "
    "with their position relative to you (steps ahead, steps to the left or right), what is directly in front of you, "
    "and what you carry. Tool: act(command) with command one of: {commands}. 'pick up', 'drop' and 'toggle' "
    "(open/close a door, open a box; a locked door needs the key of its colour in hand) act on the cell "
    "directly in front of you; you carry at most one object; 'go to X' means stand facing X, adjacent to it. "
    "There is no 'done' action: the episode ends by itself when the mission is completed. Success: the "
    "environment reports the mission completed (reward > 0; fewer steps give higher reward). Budget: "
    "{max_steps} actions."
)


@dataclass
class BabyAIConfig:
    """How many episodes each level contributes per split and where the seed ranges start."""
    per_split: int = field(default=10, metadata={"help": "episodes per level in each split"})
    dev_seed: int = field(default=1000, metadata={"help": "first seed of the dev split"})
    test_seed: int = field(default=2000, metadata={"help": "first seed of the test split (ranges must not overlap)"})
    train_seed: int = field(default=3000, metadata={
        "help": "first seed of the train split; modulo the stride (test_seed + per_split) its range must miss "
                "dev's and test's, so that no reset seed gives train a dev or test episode"})
    holdout_reset_seed: int = field(default=9, metadata={
        "help": "the reset seed of the test tasks whose episodes are the holdout split's own (never run test "
                "at this reset seed or above while designing)"})


def _make_gym(level_id: str):
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the BabyAI ids)
    return gym.make(level_id)


class BabyAISuite:
    name = "babyai"
    version = "1"  # the suite version (envs.base.suite_version): bump when tasks, actions or scoring change
    families = list(LEVELS)
    splits = ["dev", "test", "train", "holdout"]
    reset_varies = True  # another reset seed: another layout and mission of the level (jitlab/repeats.py)

    def __init__(self, config: BabyAIConfig | None = None):
        self.config = config or BabyAIConfig()
        if self.config.dev_seed < 0:
            raise ValueError("BabyAIConfig: dev_seed must be >= 0 (gym seeds are non-negative)")
        if self.config.dev_seed + self.config.per_split > self.config.test_seed:
            raise ValueError("BabyAIConfig: dev and test seed ranges overlap; raise test_seed")
        if self.config.holdout_reset_seed < 1:
            raise ValueError("BabyAIConfig: holdout_reset_seed must be >= 1 (reset seed 0 is the test split itself)")
        met = self._residues("train") & (self._residues("dev") | self._residues("test"))
        if met:
            raise ValueError(f"BabyAIConfig: train seeds meet dev or test seeds modulo the stride {self.seed_stride} "
                             f"(residues {min(met)}..{max(met)}); pick a train_seed whose range modulo "
                             f"{self.seed_stride} misses [{self.config.dev_seed % self.seed_stride}, "
                             f"{self.config.dev_seed % self.seed_stride + self.config.per_split}) and "
                             f"[{self.config.test_seed % self.seed_stride}, {self.seed_stride})")

    def first_seed(self, split: str) -> int:
        """The task seed of a split's first episode per level (holdout: test's at ``holdout_reset_seed``)."""
        check_choice("split", split, self.splits)
        cfg = self.config
        if split == "holdout":
            return cfg.test_seed + cfg.holdout_reset_seed * self.seed_stride
        return {"dev": cfg.dev_seed, "test": cfg.test_seed, "train": cfg.train_seed}[split]

    def _residues(self, split: str) -> set[int]:
        first = self.first_seed(split)
        return {(first + i) % self.seed_stride for i in range(self.config.per_split)}

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        first = self.first_seed(split)
        specs = []
        # seed-major order, so the first tasks (``--limit``) cover every level
        for seed in range(first, first + self.config.per_split):
            for fam, (level_id, max_steps) in LEVELS.items():
                if family is not None and fam != family:
                    continue
                specs.append(TaskSpec(
                    id=f"babyai-{fam}-{seed}", suite=self.name, family=fam, split=split,
                    description="", tools=[ACT], max_steps=max_steps,
                    data={"level": level_id, "seed": seed, "seed_stride": self.seed_stride}))
        for spec in specs:
            spec.description = _DESCRIPTION.format(level=spec.family, mission=MISSIONS[spec.family],
                                                   commands=", ".join(COMMANDS), max_steps=spec.max_steps)
        return specs

    @property
    def seed_stride(self) -> int:
        """How far apart the gym seeds of one task at consecutive reset seeds are: past the test range, so that
        ``task seed + seed * stride`` never gives a dev task a test task's episode (or the reverse). Kept as it was
        before train existed (committed dev and test results depend on it); train lies in other residues."""
        return self.config.test_seed + self.config.per_split

    def make_env(self, spec: TaskSpec) -> BabyAIEnv:
        return BabyAIEnv(spec)

    def oracle(self, env: BabyAIEnv) -> BabyAIOracle:
        return BabyAIOracle(env)


_QUIET = threading.local()
_WRAP_LOCK = threading.Lock()


class _ThreadQuietStdout:
    """``sys.stdout`` that drops what threads inside :func:`quiet` write and passes everything else on."""

    def __init__(self, out):
        self.out = out

    def write(self, text: str) -> int:
        return len(text) if getattr(_QUIET, "on", False) else self.out.write(text)

    def __getattr__(self, name: str):
        return getattr(self.out, name)


@contextlib.contextmanager
def quiet():
    """Drop this thread's prints (minigrid's "Sampling rejected"). contextlib.redirect_stdout swaps
    sys.stdout for the whole process, so grid threads resetting levels at once left it on a StringIO."""
    with _WRAP_LOCK:
        if not isinstance(sys.stdout, _ThreadQuietStdout):
            sys.stdout = _ThreadQuietStdout(sys.stdout)
    _QUIET.on = True
    try:
        yield
    finally:
        _QUIET.on = False


def _describe(type_idx: int, color_idx: int, state: int) -> str:
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT
    kind, color = IDX_TO_OBJECT[int(type_idx)], IDX_TO_COLOR[int(color_idx)]
    if kind == "door":
        return f"a {('open', 'closed', 'locked')[int(state)]} {color} door"
    if kind in ("key", "ball", "box"):
        return f"a {color} {kind}"
    return f"a {kind}"


def _where(ahead: int, side: int) -> str:
    parts = []
    if ahead:
        parts.append(f"{ahead} step{'s' * (ahead != 1)} ahead")
    if side:
        parts.append(f"{abs(side)} step{'s' * (abs(side) != 1)} to the {'right' if side > 0 else 'left'}")
    return " and ".join(parts) if parts else "here"


def render(image, mission: str, carrying) -> str:
    """Text for one egocentric observation. ``image`` is minigrid's (7, 7, 3) view array, agent at
    column 3 of the last row, facing towards row 0; ``carrying`` is a WorldObj or None."""
    size = image.shape[0]
    mid, back = size // 2, size - 1
    seen = []
    for i in range(size):
        for j in range(size):
            kind = int(image[i, j, 0])
            if kind in (4, 5, 6, 7, 8, 9):  # door, key, ball, box, goal, lava
                ahead, side = back - j, i - mid
                seen.append((ahead + abs(side), ahead, side, _describe(*image[i, j])))
    seen.sort()
    lines = [f"Mission: {mission}."]
    lines.append("You see: " + ("; ".join(f"{d} {_where(a, s)}" for _, a, s, d in seen) if seen else "no objects")
                 + ".")
    wall_ahead = next((d for d in range(1, back + 1) if int(image[mid, back - d, 0]) == 2), None)
    free = 0
    while free < back and int(image[mid, back - 1 - free, 0]) in (1, 3):
        free += 1
    front = int(image[mid, back - 1, 0])
    if front in (1, 3):
        front_text = "empty floor"
    elif front == 0:
        front_text = "something you cannot see"
    else:
        front_text = _describe(*image[mid, back - 1])
    lines.append(f"Directly in front of you: {front_text}. Free cells straight ahead: {free}"
                 + (f"; wall {wall_ahead} steps ahead." if wall_ahead else "."))
    sides = [f"{name}: {'wall' if int(image[mid + off, back, 0]) == 2 else 'open'}" for name, off in
             (("left", -1), ("right", 1))]
    lines.append("Next to you " + ", ".join(sides) + ".")
    held = f"a {carrying.color} {carrying.type}" if carrying is not None else "nothing"
    lines.append(f"You are carrying: {held}.")
    return "\n".join(lines)


def gym_seed(spec: TaskSpec, seed: int = 0) -> int:
    """The gym seed of ``spec``'s episode at reset seed ``seed``: ``task seed + seed * stride`` (0: the task's own)."""
    if seed < 0:
        raise ValueError(f"BabyAI reset seed must be >= 0, got {seed}")
    return spec.data["seed"] + seed * spec.data.get("seed_stride", 0)


class BabyAIEnv:
    """One BabyAI episode behind a text interface; ``reset(seed)`` picks the layout (see :func:`gym_seed`)."""

    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self.gym = _make_gym(spec.data["level"])
        self.steps = 0
        self.total_reward = 0.0
        self.finished = False
        self.seed = 0            # the reset seed and the gym seed it maps to
        self.env_seed = spec.data["seed"]
        self._mission = ""

    @property
    def unwrapped(self):
        return self.gym.unwrapped

    def _observe(self, obs: dict, note: str = "", reward: float = 0.0) -> Observation:
        text = render(obs["image"], obs["mission"], self.unwrapped.carrying)
        if note:
            text = note + "\n" + text
        if self.finished:
            text += "\nThe episode is over."
        return Observation(text, candidates=list(COMMANDS), done=self.finished, reward=reward,
                           info={"steps": self.steps})

    def reset(self, seed: int = 0) -> Observation:
        self.seed, self.env_seed = int(seed), gym_seed(self.spec, int(seed))
        with quiet():
            obs, _ = self.gym.reset(seed=self.env_seed)
        self.steps, self.total_reward, self.finished = 0, 0.0, False
        self._mission = obs["mission"]
        self._last = obs
        return self._observe(obs)

    def step(self, tool: str, args: dict) -> Observation:
        if self.finished:
            return self._observe(self._last, "The episode is already over.")
        command = str(args.get("command", "")).strip().lower().rstrip(".") if isinstance(args, dict) else ""
        command = _ALIASES.get(command, command)
        if tool != "act" or command not in COMMANDS:
            why = ("'done' is not an action here: the episode ends by itself when the mission is complete. "
                   if command == "done" else "")
            return self._observe(self._last, f"Invalid action {tool}({args!r}): {why}use act(command) with command "
                                             f"one of {', '.join(COMMANDS)}. Nothing happened.")
        self.steps += 1
        obs, reward, terminated, truncated, _ = self.gym.step(COMMANDS.index(command))
        self._last = obs
        self.total_reward += float(reward)
        self.finished = bool(terminated or truncated)
        note = f"You {command}."
        if terminated and reward > 0:
            note += " Mission complete!"
        elif truncated:
            note += " The environment's step limit is reached."
        return self._observe(obs, note, reward=float(reward))

    def score(self) -> Score:
        return Score(success=self.total_reward > 0, reward=self.total_reward,
                     info={"steps": self.steps, "level": self.spec.data["level"], "seed": self.spec.data["seed"],
                           "reset_seed": self.seed, "env_seed": self.env_seed})

    def close(self) -> None:
        self.gym.close()


class BabyAIOracle(Agent):
    """minigrid's BabyAIBot as an agent (begin/decide/observe). Reads the true state; a sanity check only."""

    def __init__(self, env: BabyAIEnv):
        self.env = env
        self.bot = None

    def begin(self, task, obs: Observation) -> None:
        from minigrid.utils.baby_ai_bot import BabyAIBot
        self.bot = BabyAIBot(self.env.gym)

    def decide(self, step: int) -> Decision:
        action = int(self.bot.replan())
        if action >= len(COMMANDS):
            # the bot answers minigrid's `done` when its plan is used up: in this suite a finished mission has
            # already ended the episode, so this is the bot failing, reported as the agent's error
            raise RuntimeError("BabyAIBot suggests 'done' before the mission is complete")
        return Decision("act", {"command": COMMANDS[action]}, thought="BabyAIBot")

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        pass
