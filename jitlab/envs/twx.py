"""TextWorldExpress suite (``twx``): six game types of the TextWorldExpress simulator as families.

    from jitlab.envs import get_suite
    suite = get_suite("twx"); spec = suite.tasks("dev", family="coin")[0]
    env = suite.make_env(spec); print(env.reset().text); env.step("act", {"command": "take coin"}); env.close()

    python -m jitlab.envs.twx list [--split dev]     # the tasks: id, game fold, seed, generation parameters
    python -m jitlab.envs.twx gold [--split dev]     # the gold check: every task's gold path through the Env API

TextWorldExpress (PyPI ``textworld-express``, Jansen & Cote 2022, arXiv:2208.01174) is a Scala reimplementation of
text games, shipped as a jar that a Java runtime runs; Python drives it through py4j. Each env starts its own JVM
(its own py4j gateway) on its first ``reset`` and ends it in ``close()``: episodes in threads never share a
simulator, and a built but never reset env holds no process. The JVM is launched with py4j's ``die_on_exit``, so it
also exits when the Python process that started it dies (its stdin closes), a SIGKILL included.

Families (``GAMES``): the game types coin, mapreader, sorting, arithmetic, twc (TextWorld Commonsense) and
cookingworld, each with one fixed parameter string: the small settings of the package's own tests
(``tests/test_textworld_express.py``, ``GAME_PARAMS``, in cognitiveailab/TextWorldExpress), which the TALES benchmark
(Cui et al. 2025, ``tales/textworld_express``) also plays: one location for coin, twc and cookingworld (coin: 5
distractor objects; twc: 1 item to put away; cookingworld: 2 ingredients, 5 distractors, no doors, unlimited
inventory), mapreader with 2 locations and the coin one location away, sorting and arithmetic as they come (the
package offers no parameters for them). Small enough for a 135M model: the gold paths are 2 commands (coin), 3-4
(twc), 5 (arithmetic), 7 (mapreader), 6-10 (sorting) and 8-16 (cookingworld) long.

Step budgets (``BUDGETS``): a documented choice, since neither the package nor its paper gives a per-game budget
(the package's one limit is ``envStepLimit=100``, the same for every game, which TALES keeps). Ours is the longest
gold path of the family over 40 seeds of each fold, times 2.5, rounded up to a multiple of 5, at least 10: coin 10,
twc 10, arithmetic 15, mapreader 20, sorting 25, cookingworld 40 (TextWorld's cooking budget is 40 too). The gold
paths come from the package's random-walk solvers, not shortest paths, so the budgets leave room for exploration.

Splits come from the game's own folds (``gameFold``; TWC and CookingWorld hold out objects and recipes between
folds) and seeds: ``dev`` plays the dev fold (seeds 10000..), ``test`` the test fold at seeds 20000..20299,
``holdout`` the test fold at seeds 20500..20799 (played once, after a design is frozen), ``train`` the train fold
(seeds 0..; teacher evidence and training, never evaluated on). The package's seed lists per fold are 0..999,
10000..10999 and 20000..20999; a family's games take seeds ``base + 50 * family index + i`` (i < 50), so no seed
repeats in the suite, across splits or families. Tasks are interleaved by family; listing them starts no JVM.

The env exposes one tool, ``act(command)``, as TextWorld's does: the first observation is the game's task
description and its first room description; every observation lists the game's admissible commands
(``validActions``, sorted) as ``candidates``. Commands are sent with spaces collapsed, and as the admissible command
they match when they differ from one in letter case only (the game's parser is case- and space-sensitive; TextWorld's
is not). success = the game's task success; reward =
its normalised score (0..1; a lost sorting game scores -1 in the game and 0 here). ``TwxSuite.oracle(env)`` replays
the game's gold action sequence (``getGoldActionSequence``, kept on the trusted side: never in an observation or the
task), a sanity check, never a baseline. Another ``reset(seed)`` plays the same game (``reset_varies`` False).

Caveats: needs a Java runtime on PATH (Debian: ``openjdk-17-jre-headless``, ``make setup`` installs it); a JVM costs
~0.2 s to start, ~0.5 s for its first game (class loading) and ~75 MB of memory, then a step is ~1-3 ms. coin at one
location is nearly trivial (the coin lies in the starting room): it checks that a harness can act at all.
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import ClassVar

from jitlab.envs.base import Score, TaskSpec, check_choice, interleave
from jitlab.errors import ConfigError
from jitlab.fields import check_fields
from jitlab.protocol import Agent, Capability, Decision, Observation

__all__ = ["ACT", "BUDGETS", "GAMES", "SPLITS", "GoldPathOracle", "TwxConfig", "TwxEnv", "TwxSuite", "main"]

ACT = Capability("act", "Issue one text command to the game, e.g. 'move east' or 'take coin'.",
                 {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})

# family -> the game's generation parameters (the package's test settings, see the module docstring)
GAMES: dict[str, str] = {
    "coin": "numLocations=1,numDistractorItems=5,limitInventorySize=0",
    "mapreader": "numLocations=2,maxDistanceApart=1,maxDistractorItemsPerLocation=2,includeDoors=0,limitInventorySize=0",
    "sorting": "",
    "arithmetic": "",
    "twc": "numLocations=1,numItemsToPutAway=1,includeDoors=0,limitInventorySize=0",
    "cookingworld": "numLocations=1,numIngredients=2,numDistractorItems=5,includeDoors=0,limitInventorySize=0",
}
# family -> step budget: max(10, 2.5 x the longest gold path over 40 seeds per fold, rounded up to 5)
BUDGETS: dict[str, int] = {"coin": 10, "mapreader": 20, "sorting": 25, "arithmetic": 15, "twc": 10, "cookingworld": 40}
# split -> (the game's fold, first seed); a family's seeds are first + 50 * family index + i, i < 50
SPLITS: dict[str, tuple[str, int]] = {"dev": ("dev", 10_000), "test": ("test", 20_000), "train": ("train", 0),
                                      "holdout": ("test", 20_500)}
_PER_FAMILY_MAX = 50
_GOALS = {
    "coin": "Find the coin and take it ('take coin'). The game has one location: the coin lies among other "
            "objects in the room you start in.",
    "mapreader": "Take the coin from the location the task names and put it into the box in the location where you "
                 "start. You carry a map ('read map'); move with 'move <direction>'.",
    "sorting": "Put every object into the box one at a time, smallest quantity first (quantities may have units: "
               "mg < g < kg, mm < cm < m, ml < l). An object out of order loses the game.",
    "arithmetic": "Read the math problem (take it, then 'read math problem'), take the object whose quantity is the "
                  "answer and put it into the box. The other objects are wrong answers.",
    "twc": "Pick up the object that is out of place and put it where it usually belongs (open a closed container "
           "first), using common sense about household objects.",
    "cookingworld": "Read the cookbook, take the ingredients it lists (and the knife), prepare each as it says (slice, "
                    "dice or chop with the knife; fry on the stove, roast in the oven, grill in the toaster: 'cook <x> "
                    "in <appliance>'), then 'prepare meal' and 'eat meal'. A wrong preparation loses the game.",
}


@dataclass
class TwxConfig:
    """How many games each family contributes per split."""
    games_per_family: int = field(default=6, metadata={
        "help": "games per family in each split (6 families: 6 gives 36 tasks per split)", "min": 1,
        "max": _PER_FAMILY_MAX, "max_why": "a family's seeds span 50 per split"})

    def __post_init__(self):
        check_fields(self)


def _describe(family: str) -> str:
    return (f"A TextWorldExpress text game ({family}). Goal: {_GOALS[family]} The first observation gives this "
            f"game's task.\nTool: act(command) sends one text command to the game (e.g. 'look around', "
            f"'inventory', 'take <object>', 'put <object> in <container>', 'open <container>') and returns the game's "
            f"reply. Every turn the observation lists the admissible commands; any of them is understood by the game "
            f"(other text is not). Success: the game's task is done. Reward: the game's score, 0 to 1. Budget: at most "
            f"{BUDGETS[family]} commands.")


def _java() -> str:
    found = shutil.which("java")
    if not found:
        raise ConfigError("suite twx needs a Java runtime and found no java on PATH; install one (Debian: "
                          "apt-get install openjdk-17-jre-headless, or make setup)")
    return found


class TwxSuite:
    """The TextWorldExpress suite: 6 game types x ``games_per_family`` games per split."""
    name = "twx"
    version = "1"  # the suite version (envs.base.suite_version): bump when tasks, actions or scoring change
    families: ClassVar[list[str]] = list(GAMES)
    splits: ClassVar[list[str]] = list(SPLITS)
    reset_varies = False  # a game is fixed by its fold and seed: every reset seed plays the same episode

    def __init__(self, config: TwxConfig | None = None):
        self.config = config or TwxConfig()

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        fold, base = SPLITS[split]
        specs = []
        for index_f, fam in enumerate(GAMES):
            if family is not None and fam != family:
                continue
            for i in range(self.config.games_per_family):
                specs.append(TaskSpec(
                    id=f"twx-{fam}-{split}-{i:02d}", suite=self.name, family=fam, split=split,
                    description=_describe(fam), tools=[ACT], max_steps=BUDGETS[fam],
                    data={"game": fam, "params": GAMES[fam], "fold": fold,
                          "seed": base + _PER_FAMILY_MAX * index_f + i}))
        return interleave(specs)

    def make_env(self, spec: TaskSpec) -> TwxEnv:
        _java()
        return TwxEnv(spec)

    def oracle(self, env: TwxEnv) -> GoldPathOracle:
        return GoldPathOracle(env)


class TwxEnv:
    """One TextWorldExpress game behind the ``act(command)`` tool; its own JVM from the first reset to ``close()``."""

    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self._sim = None
        self._infos: dict | None = None
        self._gold: list[str] = []
        self.done = False

    def reset(self, seed: int = 0) -> Observation:
        """Generate the task's game (its fold and seed; ``seed`` changes nothing) and return its first observation."""
        if self._sim is None:
            from textworld_express import TextWorldExpressEnv
            self._sim = TextWorldExpressEnv(envStepLimit=10**9)   # the runtime counts the budget, not the game
        data = self.spec.data
        obs, self._infos = self._sim.reset(seed=data["seed"], gameFold=data["fold"], gameName=data["game"],
                                           gameParams=data["params"], generateGoldPath=True)
        self._gold = list(self._sim.getGoldActionSequence())
        self.done = False
        return self._obs(f"{self._infos['taskDescription'].strip()}\n\n{obs.strip()}")

    def step(self, tool: str, args: dict) -> Observation:
        if self._infos is None:
            raise ConfigError("TwxEnv.step called before reset(); call reset() first")
        if tool != "act" or not isinstance(args.get("command"), str):
            return self._obs(f"Unknown tool call {tool}({args}): use act(command) with a text command.")
        command = " ".join(args["command"].split())
        command = {c.lower(): c for c in self._infos["validActions"] or []}.get(command.lower(), command)
        if not command:
            return self._obs("Empty command: send one of the admissible commands.")
        if self.done:
            return self._obs("The game is over.")
        before = self._reward()
        obs, _, game_done, self._infos = self._sim.step(command)
        self.done = bool(game_done)
        return self._obs(obs.strip(), reward=self._reward() - before)

    def _reward(self) -> float:
        return max(0.0, float(self._infos["score"]))

    def _obs(self, text: str, reward: float = 0.0) -> Observation:
        infos = self._infos
        # the gold path and the generation properties stay out: the harness sees the observation
        info = {"score": self._reward(), "moves": int(infos.get("numMoves", 0)), "won": bool(infos["tasksuccess"]),
                "lost": bool(infos["taskfailure"])}
        candidates = [] if self.done else sorted(infos["validActions"] or [])
        return Observation(text, candidates=candidates, done=self.done, reward=reward, info=info)

    def gold_actions(self) -> list[str]:
        """The game's gold action sequence from the start (trusted side only: the oracle and tests)."""
        return list(self._gold)

    def score(self) -> Score:
        if self._infos is None:
            return Score(success=False, reward=0.0, info={"error": "never reset"})
        infos = self._infos
        return Score(success=bool(infos["tasksuccess"]), reward=self._reward(),
                     info={"score": float(infos["score"]), "moves": int(infos.get("numMoves", 0)),
                           "lost": bool(infos["taskfailure"])})

    def java_pid(self) -> int | None:
        """The pid of this env's JVM while it runs (None before the first reset and after ``close()``)."""
        return self._sim._gateway.java_process.pid if self._sim is not None else None

    def close(self) -> None:
        """End the JVM: py4j's shutdown, then wait for the process (killed if it has not exited within 5 s)."""
        sim, self._sim = self._sim, None
        if sim is None:
            return
        proc = sim._gateway.java_process
        with contextlib.suppress(Exception):   # a JVM that already died: nothing left to shut down
            sim.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sim.close = lambda: None   # the package's __del__ closes again; once is enough


class GoldPathOracle(Agent):
    """Replays the game's gold action sequence, then 'look around'. A sanity check that env and scorer agree, never
    a baseline."""

    def __init__(self, env: TwxEnv):
        self.env = env
        self.plan: list[str] = []

    def begin(self, task, obs: Observation) -> None:
        self.plan = self.env.gold_actions()

    def decide(self, step: int) -> Decision:
        command = self.plan.pop(0) if self.plan else "look around"
        return Decision("act", {"command": command}, thought="oracle: gold path")

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        pass


def gold_check(split: str = "dev", suite: TwxSuite | None = None) -> dict:
    """Play every task of ``split`` by its gold path through the Env API, in one env (one JVM: each ``reset`` generates
    the game of the env's current spec). Returns per family the tasks, wins, the longest gold path and the budget."""
    suite = suite or TwxSuite()
    specs = suite.tasks(split)
    out = {f: {"tasks": 0, "won": 0, "longest_gold": 0, "budget": BUDGETS[f]} for f in suite.families}
    env = suite.make_env(specs[0])
    try:
        for spec in specs:
            env.spec = spec
            env.reset()
            gold = env.gold_actions()
            for command in gold:
                env.step("act", {"command": command})
            row = out[spec.family]
            row["tasks"] += 1
            row["won"] += env.score().success
            row["longest_gold"] = max(row["longest_gold"], len(gold))
    finally:
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jitlab.envs.twx", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, text in (("list", "list tasks"), ("gold", "play every task's gold path (the gold check)")):
        sub.add_parser(name, help=text).add_argument("--split", choices=TwxSuite.splits, default="dev")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        for spec in TwxSuite().tasks(args.split):
            print(spec.id, spec.data["fold"], spec.data["seed"], spec.data["params"] or "-")
        return 0
    rows = gold_check(args.split)
    for family, row in rows.items():
        print(f"{family:<13} won {row['won']}/{row['tasks']}  longest gold path {row['longest_gold']}  "
              f"budget {row['budget']}")
    return 0 if all(r["won"] == r["tasks"] for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
