"""The protocol space the compose generator searches: module options per role, prompt variants,
couplings learned from the seed bank, and reading a harness's files back into choices.

    from jitlab.jit.generate.library import catalogue, choices_of, render_files
    cat = catalogue()                      # {"M": [Option...], "P": [...], "F": [...], "A": [...], "H": [...]}
    choices = choices_of(files)            # {"M": Choice, ..., "prompt": Choice} for a harness's files
    files = render_files(choices, name=..., lineage=...)   # the five files again
    modules_of(files)                      # {"M": "jitlab.modules.memory:X", ...}: each role's library base class
    case_study_mechanisms()                # {case-study option path: ("case_studies/turnstile", ...)}

Options are discovered from the module library (``jitlab.modules.basic``, the
``memory``/``planning``/``policy``/``action`` library files, ``case_studies``, the small-model mechanisms and the
hook files, whichever exist): every class in a module's ``__all__`` that has the role's methods and can be built
with no arguments. The hooks slot (H, ``hooks.py``, optional) takes a class that defines a lifecycle hook
(``protocol.HOOKS``) and fills no other role, or ``none`` (no ``hooks.py``: the basic option, and what every
seed has). Its label is
its name in words, its description the first line of its docstring, its parameters the scalar
dataclass fields (int, float, bool, str) with their defaults and help.

Couplings: library modules talk through ``ctx.state`` (a fold directive, a sub-agent's status...),
so some only work with a partner. They are read from the seed bank and the case studies
(``seed_bank/case_studies/``): when every harness there that uses a non-basic option X also uses the same
non-basic option Y in another role, X requires Y. ``couplings()`` says them (and the fits' tool needs and
partners, below) in one line each, what the plan prompt shows so a plan generator need not learn them from refusals.

``modules_of`` reads the library class each role's class derives from, also when the file is more than a thin
subclass (a code generator's own methods); ``case_study_mechanisms`` names, per option of
``jitlab.modules.case_studies``, the case-study folders that use it (``EvidenceGatedPolicy``: Turnstile and Pegboard).

Fits (``FITS``): what the small-model mechanisms need of a task and what they say they suit, read from the task's
public text and tools only (never its suite, family or id): ``tools`` an option needs (SqlAction: ``execute_sql`` and
``commit_answer``; LikelihoodAction: the one-command tool ``act`` whose admissible candidates it chooses among),
``words`` of the task's text it suits (EgocentricPlanner: ``steps``, ``left``, ``ahead``...), and
``partners``: options it works best with in another role (LikelihoodAction takes its prior from a planner's
``Directive.data["prior"]``; the prior planners take FullHistory, whose view keeps the observation events they
parse), and ``params``, the preset compose sets when it picks the option (EgocentricPlanner's bonus 8, from the dev
traces), and ``needs``: words one of which the task's text must use (QuantityPlanner: ``quantity``, ``quantities``,
``amount``, ``amounts``; ``jitlab.modules.quantities.QUANTITY_WORDS``), where it is then called for (``called_for``).
``fit(path, task)`` is None when a needed tool or word is missing, else a bonus compose adds to the backbone's
score; partners are preferred, not required (``requirements`` are the hard couplings); ``prompt`` is the prompt
variant an option renders with (LikelihoodAction's scoring prompt lists no candidates; the other variants' templates
name ``candidates``, which it does not pass), set by compose whenever the option is chosen.

The fit rule (issue 42), said once here and applied on every generator path: ``misfit(path, task)`` says why an option
does not fit a task (a tool it needs that the task does not give: LikelihoodAction needs the one-command tool ``act``,
SqlAction ``execute_sql`` and ``commit_answer``; or, for an option with ``needs``, a task text that uses none of its
words: QuantityPlanner on a task that speaks of no quantity), ``variant_misfit`` the same
for a prompt variant written for such an option, and ``misfits(choices, task)`` for a whole harness (a file of its own
by the library class it derives from). Compose never offers an option that misfits and re-picks one a reference, a
mutation, a crossover or a repair would carry (``ComposeGenerator._refit``); a plan naming one is a parse error; a
code candidate carrying one is refused before validation (``jitlab.jit.repair.unfit``) and goes to repair; a path
that copies a reference's files takes the first that fits (``first_fitting``). ``called_for(task)`` is the rule's
other side: the options with ``needs`` that fit the task, which compose puts in their roles on every path. Nothing here
reads a task's suite, family or id.

Caveats: a seed's module file that is more than a thin subclass (methods of its own) is not a library
choice; ``choices_of`` keeps such a file verbatim (``kind="file"``), so crossover can still reuse it.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib
import inspect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from jitlab.errors import HarnessError
from jitlab.harness import case_study_names, read_files, seed_bank_dir, seed_names
from jitlab.jit.generate.base import TEMPLATE_DIR, describe_files, render
from jitlab.modules.quantities import QUANTITY_WORDS
from jitlab.protocol import HOOKS, SLOTS
from jitlab.resolve import parse_source, vendored_names

__all__ = [
    "BASIC",
    "FITS",
    "LIBRARY_MODULES",
    "NO_HOOKS",
    "ROLES",
    "SPACE",
    "ROLE_FILES",
    "Choice",
    "Option",
    "called_for",
    "case_study_mechanisms",
    "catalogue",
    "choices_of",
    "couplings",
    "first_fitting",
    "fit",
    "library_class",
    "misfit",
    "misfit_message",
    "misfits",
    "modules_of",
    "own_prompt",
    "prompt_variants",
    "render_files",
    "requirements",
    "role_of_file",
    "unlisted",
    "variant_misfit",
]

# role -> (file, class name, methods the class needs, human name), from the slot table (jitlab.protocol.SLOTS)
# role -> (file, class name, methods the class needs, human name), from the slot table (jitlab.protocol.SLOTS):
# ROLES the four module slots every harness fills, SPACE those plus the optional hooks slot (what a generator picks)
SPACE = {s.letter: (s.file, s.cls, s.required, s.name) for s in SLOTS.values()}
ROLES = {r: spec for r, spec in SPACE.items() if not SLOTS[r].optional}
ROLE_FILES = {spec[0]: role for role, spec in SPACE.items()}
LIBRARY_MODULES = ("jitlab.modules.basic", "jitlab.modules.memory", "jitlab.modules.planning",
                   "jitlab.modules.policy", "jitlab.modules.action", "jitlab.modules.case_studies",
                   "jitlab.modules.likelihood", "jitlab.modules.navigation", "jitlab.modules.grounding",
                   "jitlab.modules.egocentric", "jitlab.modules.sql", "jitlab.modules.hooks",
                   "jitlab.modules.realisation", "jitlab.modules.quantities")
NO_HOOKS = "none"   # the hooks slot's basic option: no hooks.py
BASIC = {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "H": NO_HOOKS}


@dataclass(frozen=True)
class Fit:
    """What an option needs of a task and suits in it (module docstring, "Fits")."""
    tools: tuple = ()           # tool names the task must expose, else the option is not offered
    needs: tuple = ()           # words one of which the task's text must use, else the option is not offered; where
                                # one is used, the task calls for the option (called_for)
    words: tuple = ()           # words of the task's text it suits (each present adds to its bonus)
    partners: dict = field(default_factory=dict)  # role -> option paths it works best with there
    bonus: float = 2.0          # added to the backbone's score per matched word (capped at 3 words)
    params: dict = field(default_factory=dict)    # parameters compose sets when it picks the option
    prompt: str = ""            # the prompt variant (templates/prompts/) the option renders with, when it needs one


_PRIOR_PLANNERS = ("jitlab.modules.grounding:GroundedPlanner", "jitlab.modules.navigation:MapPlanner",
                   "jitlab.modules.egocentric:EgocentricPlanner", "jitlab.modules.quantities:QuantityPlanner")
# the prior planners read the view's observation events as they came: a memory that folds or rewrites them starves
# them (dev split: EgocentricPlanner under ReasoningGraphMemory only ever scanned, 0/5 where FullHistory gave 5/5)
_PLAIN_MEMORY = ("jitlab.modules.basic:FullHistory",)
_TEXT_GAME = ("admissible", "command", "commands", "room", "rooms", "game", "take", "open", "go", "north", "east")
# the one-command tool whose admissible candidates the likelihood action chooses among: without it it can only send
# 'look' without calling the backbone (DBBench test stream: a mutation put it beside execute_sql, which got 'look' 15
# times; issue 42: a mixed stream's DBBench tasks kept a text game's likelihood action and made 0 backbone calls).
# The realisation and intervention hooks declare no such need: without a command tool they pass every action
# through untouched (a no-op, never a harm), and the single-suite DBBench stream's designs carry them (46 of 50
# tasks of small-model-keep/db-test-jit-stream-keep), which refusing them would change for no change in behaviour
_COMMAND_TOOL = ("act",)
# the small-model mechanisms' declared fits (each module's docstring says why, under "Couplings")
FITS = {
    # "auto" states: the task's text does not say whether its observations name rooms; margin 1.0: the backbone
    # decides only where it leads the runner-up clearly (chosen on TextWorld dev for small_model/explorer_margin; as
    # the JIT's preset, the 121-task mix went 83 -> 88 of 121 on dev, 76 -> 79 on test: docs/measurements.md)
    "jitlab.modules.likelihood:LikelihoodAction": Fit(tools=_COMMAND_TOOL, words=_TEXT_GAME,
                                                      partners={"P": _PRIOR_PLANNERS}, params={"state": "auto", "margin": 1.0},
                                                      prompt="choose"),
    "jitlab.modules.grounding:GroundedPlanner": Fit(words=("recipe", "cookbook", "meal", "find", "take", "goal",
                                                           "room", "rooms", "admissible"),
                                                    partners={"A": ("jitlab.modules.likelihood:LikelihoodAction",),
                                                              "M": _PLAIN_MEMORY}),
    "jitlab.modules.navigation:MapPlanner": Fit(words=("room", "rooms", "exit", "exits", "north", "east", "go"),
                                                partners={"A": ("jitlab.modules.likelihood:LikelihoodAction",),
                                                          "M": _PLAIN_MEMORY}),
    # bonus 8: at 2-4 the 135M model walked past a 'drop' directive on the dev split (small_model/navigator)
    "jitlab.modules.egocentric:EgocentricPlanner": Fit(words=("mission", "steps", "ahead", "forward", "left",
                                                              "right", "grid", "pick"),
                                                       partners={"A": ("jitlab.modules.likelihood:LikelihoodAction",),
                                                                 "M": _PLAIN_MEMORY},
                                                       params={"bonus": 8.0}),
    # the quantity prior ranks admissible commands (act) and has nothing to do where the text speaks of no quantity
    "jitlab.modules.quantities:QuantityPlanner": Fit(tools=_COMMAND_TOOL, needs=QUANTITY_WORDS,
                                                     words=("smallest", "largest", "order", "sort", "answer",
                                                            "problem", "math"),
                                                     partners={"A": ("jitlab.modules.likelihood:LikelihoodAction",),
                                                               "M": _PLAIN_MEMORY}),
    "jitlab.modules.sql:SqlAction": Fit(tools=("execute_sql", "commit_answer"),
                                        words=("sql", "table", "columns", "database", "query"), prompt="sql"),
    "jitlab.modules.realisation:RealisationHooks": Fit(words=("admissible", "command", "commands")),
    "jitlab.modules.hooks:InterventionHooks": Fit(words=("admissible", "command", "commands"),
                                                  params={"normalise": True, "rerank": "untried"}),
    "jitlab.modules.hooks:RuleHooks": Fit(params={"block_after": 1, "correct_invalid": True, "loop_after": 3}),
    # 2,000 characters of transcript, not 3,000: the fixed designs chose 2,000 (explorer) and 1,200 (navigator) on dev;
    # as the JIT's preset, the 121-task mix's dev side kept 88 of 121 at 0.85x the tokens (docs/measurements.md)
    "jitlab.modules.basic:FullHistory": Fit(params={"max_chars": 2000}),
}
# baselines and helpers that are not choices for a harness
_EXCLUDE = {"RandomAction", "SubAgent", "TaskDAG"}
_PARAM_TYPES = (bool, int, float, str)


def param_value(value) -> bool:
    """Whether ``value`` can be a module parameter of a plan or a thin subclass: a bool, int, float or str, or a tuple
    of strings (as the likelihood action's ``demote``, which BabyAI's navigator sets to ``()``)."""
    return type(value) in _PARAM_TYPES or (type(value) is tuple and all(isinstance(x, str) for x in value))


# a library traceback's file -> the role its classes play
_LIBRARY_FILE_ROLE = {"memory.py": "M", "planning.py": "P", "policy.py": "F", "action.py": "A", "hooks.py": "H",
                      "likelihood.py": "A", "sql.py": "A", "navigation.py": "P", "grounding.py": "P",
                      "egocentric.py": "P", "realisation.py": "H", "sqlground.py": "A", "quantities.py": "P"}


@dataclass(frozen=True)
class Option:
    """One implementation a role can take: ``path`` is ``module:Class``."""
    role: str
    path: str
    label: str
    description: str
    params: tuple = ()          # ((name, default, help), ...) scalar dataclass fields

    @property
    def cls(self) -> str:
        return self.path.rpartition(":")[2]

    @property
    def module(self) -> str:
        return self.path.partition(":")[0] if ":" in self.path else ""

    def defaults(self) -> dict:
        return {name: default for name, default, _ in self.params}


@dataclass
class Choice:
    """What fills one role of a harness: a library option with parameters (``kind="library"``), a
    verbatim file (``kind="file"``, e.g. from a bank entry) or, for ``prompt``, a variant name or text."""
    role: str
    kind: str                       # library | file | variant
    path: str = ""                  # library: module:Class
    params: dict = field(default_factory=dict)
    text: str = ""                  # file: the file's text; variant: the prompt.yaml text
    label: str = ""
    source: str = ""                # where it came from: "library", "variant:<name>", a bank sha

    def key(self) -> str:
        """Identity for "already tried" bookkeeping."""
        if self.kind == "library":
            return f"{self.path}{sorted(self.params.items())}"
        return "text:" + hashlib.sha256(self.text.encode()).hexdigest()[:16]


def _words(name: str) -> str:
    return " ".join(w.lower() for w in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+",
                                                 name.replace("ReAct", "React")))


def _first_line(doc: str | None) -> str:
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    return text[:200]


def _constructible(cls) -> bool:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _params(cls) -> tuple:
    if not dataclasses.is_dataclass(cls):
        return ()
    out = []
    for f in dataclasses.fields(cls):
        if f.name.startswith("_") or not f.init or f.default is dataclasses.MISSING:
            continue
        if param_value(f.default):
            out.append((f.name, f.default, str(f.metadata.get("help", ""))))
    return tuple(out)


@lru_cache(maxsize=1)
def catalogue() -> dict[str, list[Option]]:
    """{role: [Option, ...]} for M, P, F, A and H from the module library, basic option first, then library
    order (H: ``none`` first, then the hook classes)."""
    found: dict[str, dict[str, Option]] = {role: {} for role in SPACE}
    for module_name in LIBRARY_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name, None)
            if not isinstance(cls, type) or name in _EXCLUDE or name.startswith("_"):
                continue
            if not cls.__module__.startswith("jitlab.modules") or not _constructible(cls):
                continue
            path = f"{cls.__module__}:{cls.__name__}"
            fills = [role for role, (_, _, methods, _) in ROLES.items()
                     if all(callable(getattr(cls, m, None)) for m in methods)]
            if not fills and any(callable(getattr(cls, h, None)) for h in HOOKS):
                fills = ["H"]
            for role in fills:
                if path not in found[role]:
                    found[role][path] = Option(role, path, _words(cls.__name__), _first_line(cls.__doc__),
                                               _params(cls))
    found["H"][NO_HOOKS] = Option("H", NO_HOOKS, "no hooks", "no lifecycle hooks: the four modules decide alone.")
    out = {}
    for role, options in found.items():
        ordered = sorted(options.values(), key=lambda o: o.cls != BASIC[role])
        out[role] = ordered
    return out


def option(path: str, role: str | None = None) -> Option | None:
    """The catalogue option for ``module:Class`` (re-exports resolved) or a bare class name."""
    if ":" in path:
        module, _, name = path.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            cls = None
        if isinstance(cls, type):
            path = f"{cls.__module__}:{cls.__name__}"
    for r, options in catalogue().items():
        if role and r != role:
            continue
        for o in options:
            if o.path == path or o.cls == path:
                return o
    return None


def prompt_variants() -> dict[str, str]:
    """{variant name: prompt.yaml text} shipped in jitlab/jit/generate/templates/prompts/."""
    folder = TEMPLATE_DIR / "prompts"
    return {p.stem: p.read_text() for p in sorted(folder.glob("*.yaml"))}


def role_of_file(file: str | None, traceback: str = "") -> str | None:
    """The role a diagnostic points at: from the harness file it names, else from the innermost
    library frame of its traceback (``jitlab/modules/memory.py`` -> M)."""
    if file:
        name = Path(file).name
        if name in ROLE_FILES:
            return ROLE_FILES[name]
        if name == "prompt.yaml":
            return "prompt"
        if name in _LIBRARY_FILE_ROLE and "modules" in str(file):
            return _LIBRARY_FILE_ROLE[name]
    frames = re.findall(r'File "([^"]+)"', traceback or "")
    for frame in reversed(frames):
        name = Path(frame).name
        if name in ROLE_FILES and "jitlab/modules" not in frame:
            return ROLE_FILES[name]
        if "jitlab/modules/" in frame and name in _LIBRARY_FILE_ROLE:
            return _LIBRARY_FILE_ROLE[name]
    return None


# -- reading a harness back into choices ---------------------------------------------------------------
def _role_class(role: str, text: str) -> tuple[ast.ClassDef | None, dict[str, str], dict[str, ast.ClassDef]]:
    """The role's class in a module file, the library classes the file imports or inlines ({name: module:Class};
    a resolved file: the resolver's ``# library:`` markers) and the file's other top-level classes."""
    try:
        tree = parse_source(text)  # thread-safe parse (compose generates in threads)
    except SyntaxError:
        return None, {}, {}
    cls_name = SPACE[role][1]
    imports = {n: ":".join(d.rsplit(".", 1)) for n, d in vendored_names(text).items()}
    target, local = None, {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jitlab.modules"):
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Name) and node.value.id in imports:  # `_Base = ReActAction`
            imports[node.targets[0].id] = imports[node.value.id]
        elif isinstance(node, ast.ClassDef):
            if node.name == cls_name:
                target = node
            else:
                local[node.name] = node
    return target, imports, local


def library_class(role: str, text: str) -> str | None:
    """``module:Class`` of the library class a module file's role class derives from, thin subclass or not (a
    class of the file's own in between is followed, first base first); None when it derives from none."""
    target, imports, local = _role_class(role, text)
    seen = set()
    while target is not None and target.name not in seen:
        seen.add(target.name)
        names = [b.id for b in target.bases if isinstance(b, ast.Name)]
        base = next((imports[n] for n in names if n in imports), None)
        if base is not None:
            opt = option(base, role)
            return opt.path if opt else base
        target = next((local[n] for n in names if n in local), None)
    return None


def modules_of(files: dict[str, str]) -> dict[str, str | None]:
    """{role: ``module:Class``} of the library class each of M, P, F, A and H derives from (:func:`library_class`;
    H: ``none`` when the harness has no ``hooks.py``)."""
    return {role: NO_HOOKS if role == "H" and not files.get(file, "").strip() else library_class(role, files.get(file, ""))
            for role, (file, *_) in SPACE.items()}


def _library_choice(role: str, text: str) -> Choice | None:
    """The library option a thin-subclass module file uses, with the fields it overrides (also for its
    resolved form, where the library class is inlined above the subclass)."""
    target, imports, _ = _role_class(role, text)
    if target is None or len(target.bases) != 1 or not isinstance(target.bases[0], ast.Name):
        return None
    base = imports.get(target.bases[0].id)
    opt = option(base, role) if base else None
    if opt is None:
        return None
    params = {}
    for stmt in target.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, (ast.AnnAssign, ast.Assign)):
            tgt = stmt.target if isinstance(stmt, ast.AnnAssign) else (stmt.targets[0] if len(stmt.targets) == 1 else None)
            value = stmt.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            if not isinstance(tgt, ast.Name) or value is None:
                return None
            try:
                params[tgt.id] = ast.literal_eval(value)
            except ValueError:
                return None
            continue
        return None  # methods or other code: not a thin subclass
    known = opt.defaults()
    if any(k not in known or not param_value(v) for k, v in params.items()):
        return None
    return Choice(role, "library", opt.path, params, label=opt.label, source="library")


def choices_of(files: dict[str, str], source: str = "") -> dict[str, Choice]:
    """{role: Choice} for M, P, F, A, H and ``prompt`` of a harness's files (H: ``none`` without ``hooks.py``)."""
    out = {}
    for role, (file, _, _, _) in SPACE.items():
        if role == "H" and not files.get(file, "").strip():
            out[role] = Choice(role, "library", NO_HOOKS, {}, label="no hooks", source=source or "library")
            continue
        text = files.get(file, "")
        choice = _library_choice(role, text)
        if choice is None:
            choice = Choice(role, "file", text=text, label=f"{file} of {source[:12] or 'a harness'}", source=source)
        else:
            choice.source = source or "library"
        out[role] = choice
    out["prompt"] = Choice("prompt", "variant", text=files.get("prompt.yaml", ""),
                           label=f"prompt of {describe_files(files).get('name', source[:12])}", source=source)
    return out


@lru_cache(maxsize=1)
def requirements() -> dict[str, dict[str, str]]:
    """{option path: {role: required option path}} learned from the seed bank (module docstring)."""
    uses: dict[str, list[dict[str, str]]] = {}
    for name in seed_names() + case_study_names():
        try:
            files = read_files(seed_bank_dir() / name)
        except (HarnessError, OSError):  # an incomplete seed teaches nothing; the bank reports it
            continue
        if describe_files(files).get("baseline"):
            continue
        picks = {r: c.path for r, c in choices_of(files).items() if r in SPACE and c.kind == "library"}
        for path in picks.values():
            uses.setdefault(path, []).append(picks)
    basic = {option(BASIC[r], r).path for r in SPACE if option(BASIC[r], r)}
    out: dict[str, dict[str, str]] = {}
    for path, seeds in uses.items():
        if path in basic:
            continue
        mine = next(r for r, p in seeds[0].items() if p == path)
        for role in SPACE:
            if role == mine:
                continue
            partners = {s.get(role) for s in seeds}
            if len(partners) != 1:
                continue
            partner = partners.pop()
            # coupled only when each always comes with the other (mutual), so a generic module that one
            # seed happens to combine with others stays free
            if partner and partner not in basic and all(s.get(mine) == path for s in uses.get(partner, [])):
                out.setdefault(path, {})[role] = partner
    return out


@lru_cache(maxsize=8)
def couplings(hide: frozenset = frozenset()) -> tuple[str, ...]:
    """The couplings in words, one line each, for a generator's prompt: each group of options that only work together
    (:func:`requirements`, closed over partners), then each option of ``FITS`` that needs tools or words or prefers
    partners; the option paths in ``hide`` (those a task leaves :func:`unlisted`) are left out, as if not in the library.

        "IsolatedContextMemory (M) + RecursiveDAGPlanner (P) + RecursiveExecution (A): only together"
        "SqlAction (A) needs the tools execute_sql, commit_answer"
        "LikelihoodAction (A) works best with P GroundedPlanner, MapPlanner or EgocentricPlanner"
    """
    def named(path: str) -> str:
        opt = next((o for o in (option(path, r) for r in SPACE) if o is not None), None)
        return f"{opt.cls} ({opt.role})" if opt else path.rpartition(":")[2]

    order = {o.path: i for i, o in enumerate(o for role in SPACE for o in catalogue()[role])}
    lines, seen = [], set()
    for path in sorted(requirements(), key=lambda p: order.get(p, len(order))):
        group, todo = set(), [path]
        while todo:                                  # the options a choice pulls in, and theirs
            p = todo.pop()
            if p not in group:
                group.add(p)
                todo += requirements().get(p, {}).values()
        key = frozenset(group)
        if key not in seen:
            seen.add(key)
            lines.append(" + ".join(named(p) for p in sorted(group, key=lambda p: order.get(p, len(order))))
                         + ": only together")
    paired = set()                                   # a preference stated one way is not repeated the other way
    for path, spec in FITS.items():
        if option(path) is None or path in hide:
            continue
        if spec.tools:
            lines.append(f"{named(path)} needs the tools {', '.join(spec.tools)}")
        if spec.needs:
            lines.append(f"{named(path)} is only for tasks whose text says {' or '.join(spec.needs)}")
        for role, partners in spec.partners.items():
            names = [option(p).cls for p in partners
                     if option(p) and p not in hide and frozenset((path, p)) not in paired]
            paired |= {frozenset((path, p)) for p in partners}
            if names:
                alternatives = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
                lines.append(f"{named(path)} works best with {role} {alternatives}")
    return tuple(lines)


@lru_cache(maxsize=1)
def case_study_mechanisms() -> dict[str, tuple[str, ...]]:
    """{option path: case studies using it} for every option of ``jitlab.modules.case_studies`` (the case studies'
    mechanisms), each with the ``case_studies/<name>`` folders whose modules derive from it (library order)."""
    used: dict[str, list[str]] = {}
    for name in case_study_names():
        try:
            files = read_files(seed_bank_dir() / name)
        except (HarnessError, OSError):  # an incomplete folder names no mechanism; the bank reports it
            continue
        for path in modules_of(files).values():
            if path and name not in used.setdefault(path, []):
                used[path].append(name)
    return {o.path: tuple(used.get(o.path, ())) for options in catalogue().values() for o in options
            if o.module == "jitlab.modules.case_studies"}


# -- rendering choices into files ----------------------------------------------------------------------
def _render_module(role: str, choice: Choice, why: str) -> str | None:
    if choice.kind == "file":
        return choice.text
    if choice.path == NO_HOOKS:
        return None
    opt = option(choice.path, role)
    _, cls_name, _, human = SPACE[role]
    types = {name: type(default).__name__ for name, default, _ in opt.params}
    helps = {name: h for name, _, h in opt.params}
    params = [(k, v, types[k], helps.get(k, "")) for k, v in sorted(choice.params.items())]
    return render("module.py.j2", human=human, label=opt.label, why=why, module=opt.module, base=opt.cls,
                  class_name=cls_name, params=params)


def render_files(choices: dict[str, Choice], name: str, lineage: dict, why: dict | None = None,
                 good_for: str = "") -> dict[str, str]:
    """The harness files for ``choices``: M, P, F, A, prompt and description, plus ``hooks.py`` when H is not
    ``none`` (a missing H choice is ``none``)."""
    why = why or {}
    choices = {**choices}
    choices.setdefault("H", Choice("H", "library", NO_HOOKS, {}, label="no hooks", source="library"))
    rendered = {SPACE[r][0]: _render_module(r, choices[r], why.get(r, "")) for r in SPACE}
    files = {f: text for f, text in rendered.items() if text is not None}
    prompt = choices["prompt"]
    files["prompt.yaml"] = prompt.text if prompt.text.endswith("\n") else prompt.text + "\n"
    modules = {r: (choices[r].label + (f" {_params_text(choices[r].params)}" if choices[r].params else ""))
               for r in SPACE if r in ROLES or choices[r].path != NO_HOOKS}
    files["description.yaml"] = render("description.yaml.j2", name=name, lineage=lineage, modules=modules,
                                       prompt=prompt.label, good_for=good_for or _good_for(choices))
    return files


def _params_text(params: dict) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in sorted(params.items())) + ")"


def _good_for(choices: dict[str, Choice]) -> str:
    parts = []
    for r in SPACE:
        c = choices[r]
        if c.kind == "library":
            opt = option(c.path, r)
            if opt and opt.cls != BASIC[r]:
                parts.append(opt.description)
    return " ".join(parts)[:400] or "short interactive tasks; a plain ReAct-style loop."


def _tool_names(task: dict) -> list[str]:
    return [t.get("name") if isinstance(t, dict) else getattr(t, "name", "") for t in task.get("tools") or ()]


def misfit(path: str | None, task: dict) -> str | None:
    """THE fit rule, the one every generator path applies (compose's picks, mutations, copies, crossovers and
    repairs, a plan, a code candidate's library classes, a fallback to a reference): why option ``path`` (a library
    ``module:Class``) does not fit ``task``, or None when it does. Read from what the agent is given, the task's public
    dict (the tool names ``FITS`` says the option needs; for an option with ``needs``, the words of its description),
    never its suite, family, id or environment."""
    spec = FITS.get(path or "")
    if spec is None:
        return None
    tools = _tool_names(task)
    missing = [t for t in spec.tools if t not in tools]
    if missing:
        return (f"{path.rpartition(':')[2]} needs the tool{'s' if len(missing) > 1 else ''} {', '.join(missing)}, "
                f"which this task does not give (its tools: {', '.join(tools) or 'none'})")
    if spec.needs and not set(spec.needs) & _said(task):
        return (f"{path.rpartition(':')[2]} is for tasks whose text says {' or '.join(spec.needs)}, and this task's "
                f"text says none of them")
    return None


def called_for(task: dict) -> dict[str, str]:
    """{role: option path} of the options ``task`` calls for: those with ``needs`` (``FITS``) that fit it, so its text
    uses one of their words (the first such option per role, in ``FITS`` order). Compose puts each in its role on every
    path (``ComposeGenerator._refit``), so that a design copied from tasks without the feature does not leave it out;
    on a task that calls for none (every task whose text uses no such word) nothing changes."""
    out: dict[str, str] = {}
    for path, spec in FITS.items():
        opt = option(path)
        if spec.needs and opt is not None and opt.role not in out and misfit(path, task) is None:
            out[opt.role] = path
    return out


def unlisted(path: str, task: dict) -> bool:
    """Whether option ``path`` has ``needs`` and does not fit ``task`` (its text meets none of them, or a tool it needs
    is missing: a SQL task whose question says "amount"): such an option is not only not offered (``fit`` is None) but
    not shown at all where the option lists are shown to a backbone (compose's scoring prompt, the plan prompt), so
    adding one leaves those prompts of every task it does not fit as they were."""
    spec = FITS.get(path)
    return bool(spec and spec.needs and misfit(path, task))


def _said(task: dict) -> set[str]:
    """The words of a task's public text (its description), lower case."""
    return set(re.findall(r"[a-z]+", str(task.get("description", "")).lower()))


def variant_misfit(name: str, task: dict) -> str | None:
    """Why prompt variant ``name`` does not fit ``task``: a variant some options render with (``Fit.prompt``: ``sql``
    for SqlAction, ``choose`` for LikelihoodAction) is written for them, so it fits where one of them fits."""
    owners = [p for p, spec in FITS.items() if spec.prompt == name]
    reasons = [misfit(p, task) for p in owners]
    if owners and all(reasons):
        return f"the {name!r} prompt is written for {' / '.join(p.rpartition(':')[2] for p in owners)}: {reasons[0]}"
    return None


def own_prompt(text: str) -> str:
    """prompt.yaml without the library prompts jitlab.resolve appends to a resolved harness (so a resolved and an
    unresolved copy of one prompt compare equal)."""
    return text.split("\n# Library prompts the code above uses")[0].rstrip()


def misfits(choices: dict[str, Choice], task: dict) -> dict[str, str]:
    """{role: why its choice does not fit ``task``} (:func:`misfit`) over M, P, F, A, H and the prompt of a harness's
    choices (``choices_of``): a library choice by its option, a file of its own by the library class it derives from
    (``library_class``), a prompt by the variant whose text it is (:func:`variant_misfit`). Empty: everything fits."""
    out = {}
    for role, c in choices.items():
        if role in SPACE:
            path = c.path if c.kind == "library" else library_class(role, c.text)
            why = misfit(path, task)
        elif role == "prompt":
            text = own_prompt(c.text)
            name = next((n for n, t in prompt_variants().items() if own_prompt(t) == text), None)
            why = variant_misfit(name, task) if name else None
        else:
            why = None
        if why:
            out[role] = why
    return out


def misfit_message(problems: dict[str, str]) -> str:
    """The refusal in words, for a diagnostic or a plan's parse error: each role, its file and why."""
    return "; ".join(f"{role} ({SPACE[role][0] if role in SPACE else 'prompt.yaml'}): {why}"
                     for role, why in problems.items()) + ". Choose options whose tools the task gives."


def first_fitting(references: list, task: dict):
    """The first of ``references`` (``base.Reference``, best first) whose harness fits ``task`` (:func:`misfits`
    empty), else the first one (None without references): what a path that copies a reference's files takes."""
    return next((r for r in references if not misfits(choices_of(r.files, r.sha), task)),
                references[0] if references else None)


def fit(path: str, task: dict) -> float | None:
    """The bonus compose adds to option ``path``'s score for ``task`` (its public dict: description and tools, never
    suite, family or id): None when the option does not fit (:func:`misfit`), else ``bonus`` per word of ``words``
    found in the task's text (at most 3), 0 for options without a declared fit."""
    spec = FITS.get(path)
    if spec is None:
        return 0.0
    if misfit(path, task):
        return None
    said = _said(task)
    return spec.bonus * min(3, sum(1 for w in set(spec.words) if w in said))
