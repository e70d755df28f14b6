"""TextWorld suite: coin collector, treasure hunter and cooking games, generated offline with ``tw-make``.

Games are generated on first use of a task (``tw-make`` in a subprocess with ``PYTHONHASHSEED=0``,
so the same seed gives byte-identical files) and cached under ``jitlab.paths.data_dir("textworld")``.
A manifest (``manifest.json`` there) records the sha256 of each game's ``.z8`` and ``.json``; a cached
game is checked against it before every use and regenerated, with a logged warning, if it is missing
or corrupt. Generation holds a per-game file lock, so threads and processes asking for the same game
at once generate it once.

    python -m jitlab.envs.textworld prepare [--split dev|test|train|holdout] [--jobs 2]   # pre-generate games
    python -m jitlab.envs.textworld list [--split dev]                                    # list tasks

Splits: ``dev`` (seeds 10000..), ``test`` (20000..), ``train`` (30000..: teacher evidence and training, never
evaluated on) and ``holdout`` (40000..: created once, played only after a design is frozen). Each split has the
same 3 families x 3 levels x ``games_per_level`` games; seed ranges are 10000 wide, so no two splits share a
seed, and the split is in every task id. ``prepare`` without ``--split`` generates dev and test only.

The env exposes one tool, ``act(command)``; each observation lists the admissible commands as
``candidates``. success = game won; reward = score / max score. ``TextWorldSuite.oracle(env)``
returns an agent that replays the game's walkthrough (a sanity check, never a baseline).

``tw-make`` runs in its own process group, killed as a group when generation is interrupted (Ctrl-C,
timeout, any exception), and with ``PR_SET_PDEATHSIG`` (Linux) so it also dies when the run is killed
outright: a killed run leaves no ``tw-make`` behind.

Caveats: generation needs the Inform 7 tools bundled with the ``textworld`` package (Linux/macOS)
and takes ~5 s per game; the file locks use ``fcntl`` (POSIX only). Byte-identity holds for one
textworld version on one platform; the manifest records the version. On a SIGKILL of the run, a
compiler that ``tw-make`` had started finishes its (seconds-long) step on its own.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import ClassVar

from jitlab.envs.base import Score, TaskSpec, check_choice, interleave
from jitlab.errors import ConfigError, InfraError
from jitlab.lockfile import open_lock_file
from jitlab.paths import data_dir
from jitlab.plumbing import hash_file
from jitlab.protocol import Agent, Capability, Decision, Observation

__all__ = ["ACT", "LEVELS", "TextWorldConfig", "TextWorldEnv", "TextWorldSuite", "WalkthroughOracle",
           "main", "prepare"]

log = logging.getLogger(__name__)

ACT = Capability("act", "Issue one text command to the game, e.g. 'go east' or 'take coin'.",
                 {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})

# family -> level -> tw-make arguments (after the challenge name). Sizes are kept small so that a
# 135M model has a chance on level 1; higher levels add rooms, distractors and recipe steps.
LEVELS: dict[str, dict[int, list[str]]] = {
    "coin_collector": {1: ["--level", "1"], 3: ["--level", "3"], 5: ["--level", "5"]},
    "treasure_hunter": {1: ["--level", "1"], 3: ["--level", "3"], 5: ["--level", "5"]},
    "cooking": {
        1: ["--recipe", "1", "--take", "1", "--go", "1"],
        2: ["--recipe", "1", "--take", "1", "--go", "1", "--open", "--cook"],
        3: ["--recipe", "2", "--take", "2", "--go", "1", "--open", "--cut"],
    },
}
_CHALLENGE = {"coin_collector": "tw-coin_collector", "treasure_hunter": "tw-treasure_hunter",
              "cooking": "tw-cooking"}
_MAX_STEPS = {"coin_collector": 25, "treasure_hunter": 30, "cooking": 40}
_GOALS = {
    "coin_collector": "Find the coin and take it. The coin lies a few rooms away from where you start; "
                      "explore by moving through exits (go north/south/east/west) and issue 'take coin' in "
                      "the room that holds it.",
    "treasure_hunter": "The opening text names one object to recover (often with directions to it). "
                       "Explore the rooms, find that object and take it. Take nothing else: one other "
                       "object in the world loses the game when taken.",
    "cooking": "You are hungry: read the cookbook in the kitchen ('examine cookbook'), collect the "
               "ingredients it lists, prepare them as it says (e.g. slice, fry, roast with the right "
               "tool or appliance), then 'prepare meal' in the kitchen and 'eat meal'. Preparing an "
               "ingredient the wrong way loses the game.",
}
_LEVEL_NOTES = {
    "coin_collector": "level {level}: the coin is {level} room(s) away along a single path",
    "treasure_hunter": "level {level} of 1-10 (easy mode: 5 rooms, no doors)",
    "cooking": {1: "level 1: one ingredient, a single room (the kitchen)",
                2: "level 2: one ingredient that must be cooked; containers may need opening",
                3: "level 3: two ingredients that must be cut; containers may need opening"},
}
# split -> first seed; ranges are 10000 wide and _seed stays inside one, so no two splits share a seed
_SPLIT_SEED_BASE = {"dev": 10_000, "test": 20_000, "train": 30_000, "holdout": 40_000}
_PREPARE_DEFAULT = ("dev", "test")   # what ``prepare`` generates without --split
_INFO_KEYS = ("admissible_commands", "won", "lost", "score", "max_score", "policy_commands", "moves")


@dataclass
class TextWorldConfig:
    """How many games and where they live."""
    games_per_level: int = field(default=4, metadata={
        "help": "games per (family, level) in each split; 4 gives 3x3x4 = 36 games per split"})
    data_dir: str | None = field(default=None, metadata={
        "help": "cache folder for generated games; default jitlab.paths.data_dir('textworld')"})
    generate_timeout_s: float = field(default=300.0, metadata={
        "help": "wall limit for one tw-make call"})


def _seed(split: str, family: str, level: int, index: int) -> int:
    """A split's seeds lie in [base, base + 10000) (_SPLIT_SEED_BASE, 10000 apart): disjoint by construction."""
    fam = list(LEVELS).index(family)
    if not 0 <= index < 100:
        raise ConfigError(f"games_per_level must be at most 100 (got index {index}); lower it")
    return _SPLIT_SEED_BASE[split] + fam * 1000 + level * 100 + index


def _task_id(family: str, level: int, split: str, index: int) -> str:
    return f"tw-{family}-l{level}-{split}-{index:02d}"


@contextlib.contextmanager
def _locked(path: Path):
    """Exclusive advisory lock on ``path`` (held across threads and processes; never through a symbolic link)."""
    with open_lock_file(path) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class _Cache:
    """Generated games plus the manifest of their hashes, in one folder."""

    def __init__(self, root: Path, timeout_s: float):
        self.root, self.timeout_s = root, timeout_s
        self.games = root / "games"
        self.games.mkdir(parents=True, exist_ok=True)
        self.manifest_path = root / "manifest.json"

    def manifest(self) -> dict:
        try:
            return json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError:
            log.warning("textworld manifest %s is corrupt; every game will be re-checked and regenerated",
                        self.manifest_path)
            return {}

    def _record(self, game_id: str, entry: dict) -> None:
        with _locked(self.root / "manifest.lock"):
            manifest = self.manifest()
            manifest[game_id] = entry
            tmp = self.manifest_path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
            os.replace(tmp, self.manifest_path)

    def paths(self, game_id: str) -> dict[str, Path]:
        return {ext: self.games / f"{game_id}.{ext}" for ext in ("z8", "json")}

    def check(self, game_id: str, argv: list[str]) -> str | None:
        """None when the cached game matches the manifest, else why it does not."""
        entry = self.manifest().get(game_id)
        if entry is None:
            return "not generated yet"
        if entry.get("argv") != argv:
            return f"generated with other arguments {entry.get('argv')}"
        for ext, path in self.paths(game_id).items():
            if not path.exists():
                return f"{path.name} is missing"
            if hash_file(path).hexdigest() != entry["sha256"][ext]:
                return f"{path.name} does not match its sha256 in the manifest (corrupt)"
        return None

    def ensure(self, game_id: str, argv: list[str]) -> dict:
        """Return the manifest entry of a verified game, generating it if needed."""
        with _locked(self.games / f"{game_id}.lock"):
            problem = self.check(game_id, argv)
            if problem is None:
                return self.manifest()[game_id]
            if problem != "not generated yet":
                log.warning("textworld game %s: %s; regenerating it", game_id, problem)
            entry = self._generate(game_id, argv)
            self._record(game_id, entry)
            return entry

    def _generate(self, game_id: str, argv: list[str]) -> dict:
        tw_make = _tw_make()
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=self.games, prefix=f".{game_id}.") as tmp:
            # a relative --output keeps the temp folder's name out of the game's metadata (byte-identity)
            cmd = [sys.executable, tw_make, *argv, "--output", "game.z8", "--silent", "-f"]
            env = dict(os.environ, PYTHONHASHSEED="0")
            proc = _run_group([sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *cmd], cwd=tmp, env=env,
                              timeout_s=self.timeout_s, what=f"tw-make for {game_id} ({' '.join(argv)})")
            made = {ext: Path(tmp) / f"game.{ext}" for ext in ("z8", "json")}
            if proc.returncode != 0 or not all(p.exists() for p in made.values()):
                raise InfraError(f"tw-make failed for {game_id} (exit {proc.returncode}): "
                                 f"{(proc.stderr or proc.stdout)[-800:]}\ncommand: {' '.join(cmd)}")
            walkthrough = json.loads(made["json"].read_text())["metadata"]["walkthrough"]
            sha = {ext: hash_file(p).hexdigest() for ext, p in made.items()}
            final = self.paths(game_id)
            os.replace(made["json"], final["json"])   # atomic renames; json first so a z8 never lacks it
            os.replace(made["z8"], final["z8"])
        return {"argv": argv, "sha256": sha, "walkthrough": walkthrough, "textworld": version("textworld"),
                "generate_s": round(time.perf_counter() - start, 2), "generated_at": time.time()}


# Runs first in tw-make's process: die with the parent (PR_SET_PDEATHSIG survives exec), then become tw-make.
_DIE_WITH_PARENT = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux only)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):  # the parent died before prctl took effect
    sys.exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


def _run_group(cmd: list[str], cwd: str, env: dict, timeout_s: float, what: str) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a new process group; kill the whole group if we stop waiting for any reason."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException as exc:  # timeout, KeyboardInterrupt, SystemExit: no orphaned tw-make or compiler
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise InfraError(f"{what} ran past {timeout_s}s") from exc
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _tw_make() -> str:
    local = Path(sys.executable).parent / "tw-make"
    found = str(local) if local.exists() else shutil.which("tw-make")
    if not found:
        raise ConfigError("tw-make not found: install textworld into this Python environment "
                          "(pip install textworld)")
    return found


class TextWorldSuite:
    """The TextWorld task suite: 3 families x 3 levels x ``games_per_level`` games per split."""
    name = "textworld"
    version = "1"  # the suite version (envs.base.suite_version): bump when tasks, actions or scoring change
    families: ClassVar[list[str]] = list(LEVELS)
    splits: ClassVar[list[str]] = list(_SPLIT_SEED_BASE)
    reset_varies = False  # a game is deterministic: every reset seed plays the same episode (jitlab/repeats.py)

    def __init__(self, config: TextWorldConfig | None = None):
        self.config = config or TextWorldConfig()
        root = Path(self.config.data_dir) if self.config.data_dir else data_dir("textworld")
        self.cache = _Cache(root, self.config.generate_timeout_s)

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        manifest = self.cache.manifest()
        specs = []
        for fam, levels in LEVELS.items():
            if family is not None and fam != family:
                continue
            for level, args in levels.items():
                for index in range(self.config.games_per_level):
                    seed = _seed(split, fam, level, index)
                    task_id = _task_id(fam, level, split, index)
                    argv = [_CHALLENGE[fam], *args, "--seed", str(seed)]
                    entry = manifest.get(task_id, {})
                    specs.append(TaskSpec(
                        id=task_id, suite=self.name, family=fam, split=split,
                        description=_describe(fam, level), tools=[ACT], max_steps=_MAX_STEPS[fam],
                        data={"level": level, "seed": seed, "argv": argv,
                              "game": str(self.cache.paths(task_id)["z8"]),
                              "walkthrough": list(entry.get("walkthrough", [])) if entry.get("argv") == argv else []}))
        return interleave(specs, key=lambda spec: (spec.family, spec.data["level"]))

    def ensure(self, spec: TaskSpec) -> TaskSpec:
        """Generate (or verify) the task's game; return the spec with its walkthrough filled in."""
        entry = self.cache.ensure(spec.id, list(spec.data["argv"]))
        return dataclasses.replace(spec, data={**spec.data, "walkthrough": list(entry["walkthrough"])})

    def make_env(self, spec: TaskSpec) -> TextWorldEnv:
        return TextWorldEnv(self.ensure(spec))

    def oracle(self, env: TextWorldEnv) -> WalkthroughOracle:
        return WalkthroughOracle(env)


def _describe(family: str, level: int) -> str:
    note = _LEVEL_NOTES[family]
    note = note[level] if isinstance(note, dict) else note.format(level=level)
    return (f"A TextWorld text adventure ({family.replace('_', ' ')}, {note}). Goal: {_GOALS[family]}\n"
            f"Tool: act(command) sends one text command to the game (e.g. 'go east', 'open door', "
            f"'take coin', 'look', 'inventory') and returns the game's reply. Every turn the observation "
            f"lists the admissible commands; any of them is understood by the game (other text usually is "
            f"not). Success: the game is won. Reward: points scored / maximum points. Budget: at most "
            f"{_MAX_STEPS[family]} commands.")


_BANNER_LINE = re.compile(r"^[^A-Za-z]*$")


def _clean(feedback: str, intro: bool = False) -> str:
    """Drop the ASCII banner (reset only), the trailing '>' prompt and status line, extra blank lines."""
    lines = feedback.replace("\r", "").split("\n")
    if intro:
        while lines and _BANNER_LINE.match(lines[0]):
            lines.pop(0)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].lstrip().startswith(">"):
            lines = lines[:i]
            break
    lines = [line.strip() if line.startswith(" " * 8) else line.rstrip() for line in lines
             if not line.startswith("Would you like to RESTART")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# TextWorld parses game logic with one module-global tatsu parser that is not thread-safe: episodes
# running in threads (runner --concurrency) crashed in reset with "pop from empty list". Steps cost
# ~1.5 ms, so serializing every call into TextWorld costs nothing next to a backbone call.
_TEXTWORLD_LOCK = threading.Lock()


class TextWorldEnv:
    """One TextWorld game behind the ``act(command)`` tool."""

    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self._env = None
        self._state = None
        self.done = False

    def reset(self, seed: int = 0) -> Observation:
        """Start the game. TextWorld games are deterministic, so ``seed`` changes nothing."""
        import textworld
        self.close()
        infos = textworld.EnvInfos(feedback=True, **{k: True for k in _INFO_KEYS})
        with _TEXTWORLD_LOCK:
            self._env = textworld.start(self.spec.data["game"], request_infos=infos)
            self._state = self._env.reset()
        self.done = False
        return self._obs(_clean(self._state.feedback, intro=True))

    def step(self, tool: str, args: dict) -> Observation:
        if self._env is None:
            raise ConfigError("TextWorldEnv.step called before reset(); call reset() first")
        if tool != "act" or not isinstance(args.get("command"), str):
            return self._obs(f"Unknown tool call {tool}({args}): use act(command) with a text command.")
        command = " ".join(args["command"].split())
        if not command:
            return self._obs("Empty command: send one of the admissible commands.")
        if self.done:
            return self._obs("The game is over.")
        before = self._state["score"]
        with _TEXTWORLD_LOCK:
            self._state, _, game_done = self._env.step(command)
        self.done = bool(game_done or self._state["won"] or self._state["lost"])
        delta = (self._state["score"] - before) / max(1, self._state["max_score"])
        return self._obs(_clean(self._state.feedback), reward=delta)

    def _obs(self, text: str, reward: float = 0.0) -> Observation:
        state = self._state
        # policy_commands stay out of the observation: the harness sees it and must not get the answer
        info = {"score": state["score"], "max_score": state["max_score"], "moves": state["moves"],
                "won": bool(state["won"]), "lost": bool(state["lost"])}
        candidates = [] if self.done else sorted(state["admissible_commands"] or [])
        return Observation(text, candidates=candidates, done=self.done, reward=reward, info=info)

    def policy_commands(self) -> list[str]:
        """The game's own plan from the current state (trusted side only: used by the oracle)."""
        return list(self._state["policy_commands"] or []) if self._state is not None else []

    def score(self) -> Score:
        if self._state is None:
            return Score(success=False, reward=0.0, info={"error": "never reset"})
        state = self._state
        return Score(success=bool(state["won"]), reward=state["score"] / max(1, state["max_score"]),
                     info={"score": state["score"], "max_score": state["max_score"], "moves": state["moves"],
                           "lost": bool(state["lost"])})

    def close(self) -> None:
        if self._env is not None:
            with _TEXTWORLD_LOCK:
                self._env.close()
            self._env = None


class WalkthroughOracle(Agent):
    """Replays the game's walkthrough; if that runs out before the game is won, follows the game's
    current policy commands. A sanity check that env and scorer agree, never a baseline."""

    def __init__(self, env: TextWorldEnv):
        self.env = env
        self.plan: list[str] = []
        self.fallbacks = 0

    def begin(self, task, obs: Observation) -> None:
        self.plan = list(task.data.get("walkthrough") or self.env.spec.data.get("walkthrough") or [])
        self.fallbacks = 0

    def decide(self, step: int) -> Decision:
        if self.plan:
            return Decision("act", {"command": self.plan.pop(0)}, thought="oracle: walkthrough")
        self.fallbacks += 1
        policy = self.env.policy_commands()
        return Decision("act", {"command": policy[0] if policy else "look"}, thought="oracle: game policy")

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        pass


def prepare(split: str | None = None, jobs: int = 2, suite: TextWorldSuite | None = None) -> dict:
    """Pre-generate every game of ``split`` (dev and test when None). Returns counts and timing."""
    suite = suite or TextWorldSuite()
    check_choice("split", split, suite.splits)
    specs = [s for sp in ([split] if split else _PREPARE_DEFAULT) for s in suite.tasks(sp)]
    start, started_at = time.perf_counter(), time.time()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(suite.ensure, specs))
    manifest = suite.cache.manifest()
    counts: dict[str, int] = {}
    for s in specs:
        key = f"{s.split}/{s.family}"
        counts[key] = counts.get(key, 0) + 1
    fresh = [manifest[s.id] for s in specs if manifest[s.id].get("generated_at", 0) >= started_at]
    return {"games": len(specs), "counts": counts, "generated_now": len(fresh),
            "generate_s_now": round(sum(e["generate_s"] for e in fresh), 1),
            "wall_s": round(time.perf_counter() - start, 1), "cache": str(suite.cache.root)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jitlab.envs.textworld", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_prep = sub.add_parser("prepare", help="generate (or verify) every game")
    p_prep.add_argument("--split", choices=TextWorldSuite.splits, default=None, help="default: " + " and ".join(_PREPARE_DEFAULT))
    p_prep.add_argument("--jobs", type=int, default=2, help="parallel tw-make processes")
    p_list = sub.add_parser("list", help="list tasks")
    p_list.add_argument("--split", choices=TextWorldSuite.splits, default="dev")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.cmd == "prepare":
        print(json.dumps(prepare(args.split, args.jobs), indent=1))
    else:
        for spec in TextWorldSuite().tasks(args.split):
            print(spec.id, spec.data["seed"], " ".join(spec.data["argv"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
