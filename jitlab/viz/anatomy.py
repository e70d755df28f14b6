"""Harness anatomy: what fills M, P, F, A in a harness folder, derived from its code, and a diagram of it.

    from jitlab.viz.anatomy import anatomy, table, write_table
    a = anatomy("react")                  # a seed name or any harness folder (generated ones too)
    a                                     # JupyterLab shows the SVG diagram inline (_repr_svg_)
    a.save("figures/anatomy/react.svg")
    print(a.describe())                   # the same facts as text
    write_table(table(), "figures")       # Table 2: harness x M/P/F/A -> table2_seed_bank.md/.csv
    save_diagrams(out_dir="figures/anatomy")   # one SVG per seed

Nothing is read from ``description.yaml`` except the harness name. How each fact is derived:

- classes: :func:`jitlab.harness.load_harness` (a broken folder is a HarnessError naming the file);
- library bases: the classes of the MRO defined in ``jitlab.modules.*``, or inlined from there into a resolved
  harness file (the resolver's ``# library: jitlab.modules.<m>.<Name>`` marker); the slot's label is the nearest
  one, else the first line of the class docstring, else the class name. A ``*`` after the label means
  the harness's own class overrides protocol methods or hooks of that library class;
- config: dataclass fields and public literal class attributes, valued on a fresh instance
  (``cls()``, as the runtime builds it);
- state: attributes assigned as ``self.x = ...`` in any of the class's methods (own or inherited);
- backbone: an AST scan of every method the class has (own and inherited) for calls of
  ``<...>.llm.chat`` / ``<...>.llm.score`` (also ``.backbone.chat``, a name ``llm``/``backbone`` and
  local aliases such as ``llm = ctx.llm``), following ``self.m()``, ``super().m()``, ``self.m`` passed
  as a callback, module-level functions and ``Class.m`` of the repo or harness folder, methods of
  objects stored as ``self.x = SomeClass(...)`` and every method of a helper class instantiated in
  the code. Each call site is reported with the call path from the protocol method or hook that
  reaches it;
- tools: literal names in ``Capability("name", "description", ...)`` (tools the module adds; one with an
  empty description counts as a placeholder and is skipped) and
  ``Decision("name", ...)`` (tools it emits), plus Capability objects it references;
- flow: whether each module reads its protocol inputs (does the planner read ``view``? does the
  policy read ``directive``? does the action read ``context.view`` / ``.directive`` / ``.capabilities``?)
  and whether the planner only ever returns a constant directive.

Caveats: best effort and static. Calls made through ``getattr``/strings, objects handed in from outside
or third-party code are not followed. A backbone call found is a call that *can* happen (it may sit
behind a config switch), not one that happens on every step.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from jitlab.errors import HarnessError
from jitlab.harness import Harness, load_harness, seed_names
from jitlab.paths import package_root, repo_root
from jitlab.protocol import HOOKS, Capability
from jitlab.resolve import parse_source
from jitlab.viz.tables import markdown_table

__all__ = ["SLOTS", "Anatomy", "BackboneCall", "FlowEdge", "SlotAnatomy", "anatomy", "save_diagrams",
           "summary_row", "table", "to_svg", "write_table"]

# slot letter -> (key in Harness.classes, role, file, protocol methods with their input parameters)
SLOTS = {
    "M": ("memory", "Memory", "memory.py", {"reset": (), "update": ("event",), "view": ()}),
    "P": ("planner", "Planner", "planning.py", {"reset": (), "plan": ("view",)}),
    "F": ("policy", "CapabilityPolicy", "tool_policy.py",
          {"reset": (), "select": ("directive", "view", "registry")}),
    "A": ("action", "Action", "action.py", {"reset": (), "act": ("context",)}),
    "H": ("hooks", "Hooks", "hooks.py", {"reset": ()}),
}
_INIT_METHODS = ("__init__", "__post_init__")
_SKIP_MODULES = ("builtins", "typing", "typing_extensions", "abc", "jitlab.protocol")
_LITERALS = (int, float, str, bool, tuple, list, dict, type(None))


@dataclass
class BackboneCall:
    """One place a module can call the backbone: ``kind`` chat|score, the call ``path`` from an entry
    method (e.g. ``["act", "to_decision", "_nearest"]``), the call ``expr`` and ``where`` (file:line)."""
    kind: str
    path: list[str]
    expr: str
    where: str

    def __str__(self) -> str:
        return " -> ".join(self.path + [self.expr])


@dataclass
class SlotAnatomy:
    """What one slot of a harness holds, as read from its code."""
    slot: str
    role: str
    file: str
    class_name: str
    label: str
    doc: str = ""
    bases: list[str] = field(default_factory=list)          # direct bases, short names
    library_bases: list[str] = field(default_factory=list)  # dotted jitlab.modules classes in MRO order
    overrides: list[str] = field(default_factory=list)      # protocol methods/hooks the harness's own code defines
    config: dict[str, Any] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)     # attribute -> "method: initial value"
    backbone: list[BackboneCall] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    tools_added: list[str] = field(default_factory=list)
    tools_emitted: list[str] = field(default_factory=list)
    reads: dict[str, bool] = field(default_factory=dict)
    constant_output: bool = False                           # planner: plan() only returns a constant Directive

    @property
    def calls_backbone(self) -> bool:
        return bool(self.backbone)

    @property
    def backbone_kinds(self) -> list[str]:
        return sorted({c.kind for c in self.backbone})


@dataclass
class FlowEdge:
    """One arrow of the v_t -> d_t -> C_t -> e_t flow; ``used`` is False when the receiver ignores it."""
    src: str
    dst: str
    symbol: str
    label: str
    used: bool = True


@dataclass
class Anatomy:
    """A harness's anatomy. ``slots`` is keyed M, P, F, A (and H for hooks.py)."""
    name: str
    folder: Path
    sha: str
    slots: dict[str, SlotAnatomy]
    flow: list[FlowEdge]

    @property
    def hooks(self) -> dict[str, list[str]]:
        """hook name -> slots that define it."""
        return {h: [s for s, a in self.slots.items() if h in a.hooks] for h in HOOKS}

    def describe(self) -> str:
        lines = [f"harness {self.name} ({self.folder}, sha {self.sha[:12]})"]
        for s, a in self.slots.items():
            lines.append(f"{s} {a.role}: {a.label}  [class {a.class_name}({', '.join(a.bases)}) in {a.file}]")
            if a.library_bases:
                lines.append(f"    library: {' > '.join(a.library_bases)}")
            if a.config:
                lines.append(f"    config: {', '.join(f'{k}={v!r}' for k, v in a.config.items())}")
            if a.state:
                lines.append(f"    state: {', '.join(f'{k} ({v})' for k, v in a.state.items())}")
            lines.append("    backbone: " + ("; ".join(map(str, a.backbone)) if a.backbone else "none"))
            for label, items in (("hooks", a.hooks), ("tools added", a.tools_added),
                                 ("tools emitted", a.tools_emitted), ("overrides", a.overrides)):
                if items:
                    lines.append(f"    {label}: {', '.join(items)}")
        lines.append("flow: " + "; ".join(f"{e.src} -{e.symbol}-> {e.dst}" + ("" if e.used else " (ignored)")
                                          for e in self.flow))
        return "\n".join(lines)

    def _repr_svg_(self) -> str:
        return to_svg(self)

    def save(self, path: str | Path) -> Path:
        """Write the SVG diagram to ``path`` (folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_svg(self))
        return path


# ---------------------------------------------------------------------------------------------- analysis

def _shown_path(folder) -> str:
    """The folder relative to the checkout when inside it, so saved diagrams do not embed a machine path."""
    from jitlab.harness import seed_bank_dir
    folder = Path(folder).resolve()
    if folder.is_relative_to(seed_bank_dir().resolve()):  # a seed: the path a reader of the repository knows
        return str(Path("seed_bank") / folder.relative_to(seed_bank_dir().resolve()))
    for root in (repo_root(), package_root().parent):   # a checkout, or site-packages when installed
        try:
            return str(Path(folder).resolve().relative_to(root))
        except ValueError:
            continue
    return str(folder)


def anatomy(folder_or_name: str | Path | Harness) -> Anatomy:
    """The anatomy of a harness (seed name, folder or loaded Harness), derived from its code."""
    harness = folder_or_name if isinstance(folder_or_name, Harness) else load_harness(folder_or_name)
    folder = Path(harness.folder).resolve()
    slots = {}
    for slot, (key, role, file, protocol) in SLOTS.items():
        cls = harness.classes.get(key)
        if cls is not None:
            slots[slot] = _analyse(slot, role, file, protocol, cls, folder)
    missing = [SLOTS[s][2] for s in "MPFA" if s not in slots]
    if missing:  # load_harness guarantees them; guard against a changed loader
        raise HarnessError(f"no module class found for {', '.join(missing)}", file=missing[0])
    return Anatomy(name=harness.name, folder=folder, sha=harness.sha, slots=slots, flow=_flow(slots))


def _flow(slots: dict[str, SlotAnatomy]) -> list[FlowEdge]:
    p, f, a = slots["P"], slots["F"], slots["A"]
    planner_live = not p.constant_output
    return [
        FlowEdge("Env", "M", "o_t", "observations and actions -> M.update", True),
        FlowEdge("M", "P", "v_t", "view -> P.plan", p.reads.get("view", False)),
        FlowEdge("M", "F", "v_t", "view -> F.select", f.reads.get("view", False)),
        FlowEdge("P", "F", "d_t", "directive -> F.select", planner_live and f.reads.get("directive", False)),
        FlowEdge("F", "A", "C_t", "capabilities -> A.act", a.reads.get("capabilities", False)),
        FlowEdge("M", "A", "v_t", "context.view -> A.act", a.reads.get("view", False)),
        FlowEdge("P", "A", "d_t", "context.directive -> A.act", planner_live and a.reads.get("directive", False)),
        FlowEdge("A", "Env", "e_t", "Decision(tool, args) -> env.step", True),
    ]


def _analyse(slot: str, role: str, file: str, protocol: dict, cls: type, folder: Path) -> SlotAnatomy:
    methods = _methods(cls)
    own = [k for k in cls.__mro__ if _in_folder(k, folder) and not _vendored_from(k)]
    library = [k for k in cls.__mro__ if k.__module__.startswith("jitlab.modules") or _vendored_from(k)]
    label = library[0].__name__ if library else _doc_label(cls)
    overrides = [name for name, (owner, _) in methods.items()
                 if owner in own and (name in protocol or name in HOOKS) and library
                 and any(name in vars(k) for k in library)]
    if overrides:
        label += "*"
    doc_source = library[0] if library and not inspect.getdoc(cls) else cls
    walker = _Walker(cls, methods, folder)
    roots = [n for n in protocol if n in methods] + [h for h in HOOKS if h in methods] + \
            [n for n in _INIT_METHODS if n in methods] + sorted(methods)
    for name in roots:
        walker.walk(cls, methods[name][1], [name])
    config = _config(cls, methods)
    hooks = [h for h in HOOKS if h in methods]
    return SlotAnatomy(
        slot=slot, role=role, file=file, class_name=cls.__name__, label=label,
        doc=_first_doc(doc_source),
        bases=[b.__name__ for b in cls.__bases__ if b is not object],
        library_bases=[_vendored_from(k) or f"{k.__module__}.{k.__qualname__}" for k in library],
        overrides=overrides, config=config, state=_state(cls, methods, folder, set(config)),
        backbone=walker.calls, hooks=hooks, tools_added=walker.tools_added, tools_emitted=walker.tools_emitted,
        reads=_reads(slot, protocol, methods, walker), constant_output=slot == "P" and _constant_plan(methods))


def _vendored_from(klass: type) -> str | None:
    """``jitlab.modules.<m>.<Name>`` when the class is library code a resolved harness file inlines
    (the resolver's ``# library:`` marker), else None."""
    path = _module_file(klass)
    if path is None or not path.is_file():
        return None
    from jitlab.resolve import vendored_names
    return vendored_names(_read(path)).get(klass.__name__)


_TEXT_CACHE: dict[Path, str] = {}


def _read(path: Path) -> str:
    if path not in _TEXT_CACHE:
        _TEXT_CACHE[path] = path.read_text()
    return _TEXT_CACHE[path]


def _skip(klass: type) -> bool:
    return klass is object or klass.__module__ in _SKIP_MODULES or klass.__module__.startswith("typing")


def _methods(cls: type) -> dict[str, tuple[type, types.FunctionType]]:
    """Every method the class has (own or inherited) -> (defining class, function)."""
    out: dict[str, tuple[type, types.FunctionType]] = {}
    seen: set[str] = set()
    for klass in cls.__mro__:
        if _skip(klass):
            continue
        for name, raw in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else \
                raw.fget if isinstance(raw, property) else raw
            if isinstance(fn, types.FunctionType) and (not name.startswith("__") or name in _INIT_METHODS):
                out[name] = (klass, fn)
    return out


def _module_file(obj) -> Path | None:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    return Path(path).resolve() if path else None


def _in_folder(klass: type, folder: Path) -> bool:
    path = _module_file(klass)
    return path is not None and path.parent == folder


def _followable(obj, folder: Path) -> bool:
    """Only code of the harness folder or of jitlab is followed (not the stdlib or other site-packages)."""
    path = _module_file(obj)
    if path is None:
        return False
    return path.is_relative_to(folder) or path.is_relative_to(package_root())


_FN_CACHE: dict[types.FunctionType, tuple[ast.AST, str, int] | None] = {}


def _fn_ast(fn: types.FunctionType):
    """(FunctionDef node, file, first line) of a function, or None when its source is unavailable."""
    if fn not in _FN_CACHE:
        try:
            source = textwrap.dedent(inspect.getsource(fn))
            node = parse_source(source).body[0]
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                raise TypeError("not a def")
            _FN_CACHE[fn] = (node, inspect.getsourcefile(fn) or "?", fn.__code__.co_firstlineno)
        except (OSError, TypeError, SyntaxError, IndexError):
            _FN_CACHE[fn] = None
    return _FN_CACHE[fn]


def _self_name(node) -> str | None:
    args = node.args.posonlyargs + node.args.args
    return args[0].arg if args else None


_LLM_NAMES = ("llm", "backbone")


def _is_llm(expr: ast.AST, aliases: set[str]) -> bool:
    """``<...>.llm`` / ``<...>.backbone``, a name ``llm`` / ``backbone``, or a local alias of one."""
    return (isinstance(expr, ast.Attribute) and expr.attr in _LLM_NAMES) or \
        (isinstance(expr, ast.Name) and (expr.id in _LLM_NAMES or expr.id in aliases))


def _short_path(where: str) -> str:
    path = Path(where)
    for root in (repo_root(), package_root().parent):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return path.name


class _Walker:
    """Follows calls from a class's methods and collects backbone calls and tool names."""

    def __init__(self, cls: type, methods: dict, folder: Path):
        self.cls, self.folder = cls, folder
        self.method_cache = {cls: methods}
        self.visited: set[tuple[type | None, types.FunctionType]] = set()
        self.calls: list[BackboneCall] = []
        self.sites: set[tuple[str, str]] = set()
        self.tools_added: list[str] = []
        self.tools_emitted: list[str] = []
        self.attributes: set[str] = set()      # attribute names read anywhere (for the flow)
        self.attr_types = _attr_types(cls, methods, folder)

    def _methods_of(self, klass: type) -> dict:
        if klass not in self.method_cache:
            self.method_cache[klass] = _methods(klass)
        return self.method_cache[klass]

    def walk(self, owner: type | None, fn: types.FunctionType, path: list[str]) -> None:
        queue = [(owner, fn, path)]
        while queue:
            owner, fn, path = queue.pop(0)
            if (owner, fn) in self.visited:
                continue
            self.visited.add((owner, fn))
            parsed = _fn_ast(fn)
            if parsed is None:
                continue
            node, file, first = parsed
            this = _self_name(node) if owner is not None else None
            aliases = {t.id for n in ast.walk(node) if isinstance(n, ast.Assign) and _is_llm(n.value, set())
                       for t in n.targets if isinstance(t, ast.Name)}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute):
                    self.attributes.add(sub.attr)
                if isinstance(sub, ast.Call):
                    self._call(sub, fn, file, first, path, aliases)
                for target in self._targets(sub, owner, fn, this):
                    queue.append((target[0], target[1], path + [target[2]]))

    def _call(self, call: ast.Call, fn, file: str, first: int, path: list[str], aliases: set[str]) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("chat", "score") and _is_llm(func.value, aliases):
            where = f"{_short_path(file)}:{first + call.lineno - 1}"
            if (where, func.attr) not in self.sites:
                self.sites.add((where, func.attr))
                self.calls.append(BackboneCall(func.attr, list(path), ast.unparse(func), where))
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in ("Capability", "Decision"):
            arg = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg in ("name", "tool")), None)
            desc = call.args[1] if len(call.args) > 1 else next(
                (k.value for k in call.keywords if k.arg == "description"), None)
            placeholder = name == "Capability" and (desc is None or (isinstance(desc, ast.Constant) and not desc.value))
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not placeholder:
                bucket = self.tools_added if name == "Capability" else self.tools_emitted
                if arg.value not in bucket:
                    bucket.append(arg.value)

    def _targets(self, sub: ast.AST, owner: type | None, fn, this: str | None):
        """Functions a node leads to: self.m, super().m, self.x.m, f, module.f, Class.m, every method of a
        helper class instantiated here; Capability objects seen."""
        if isinstance(sub, ast.Call):
            klass = _resolve(sub.func, fn)
            if isinstance(klass, type) and not _skip(klass) and _followable(klass, self.folder):
                for name, (_, method) in self._methods_of(klass).items():
                    yield klass, method, f"{klass.__name__}.{name}"
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
            value = sub.value
            if owner is not None and isinstance(value, ast.Name) and value.id == this:
                found = self._methods_of(owner).get(sub.attr)
                if found:
                    yield owner, found[1], sub.attr
                else:
                    self._capability(getattr(owner, sub.attr, None))
            elif owner is not None and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id == "super":
                defining = next((k for k in owner.__mro__ if fn in [v for v in vars(k).values()]), owner)
                mro = owner.__mro__
                for klass in mro[mro.index(defining) + 1:] if defining in mro else ():
                    raw = vars(klass).get(sub.attr)
                    if isinstance(raw, types.FunctionType):
                        yield owner, raw, f"super().{sub.attr}"
                        break
            elif owner is not None and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                    and value.value.id == this and value.attr in self.attr_types:
                klass = self.attr_types[value.attr]
                found = self._methods_of(klass).get(sub.attr)
                if found:
                    yield klass, found[1], f"{value.attr}.{sub.attr}"
            elif isinstance(value, ast.Name):
                holder = fn.__globals__.get(value.id)
                if isinstance(holder, types.ModuleType):
                    target = getattr(holder, sub.attr, None)
                    if isinstance(target, types.FunctionType) and _followable(target, self.folder):
                        yield None, target, sub.attr
                elif isinstance(holder, type) and not _skip(holder) and _followable(holder, self.folder):
                    found = self._methods_of(holder).get(sub.attr)
                    if found:
                        yield holder, found[1], f"{holder.__name__}.{sub.attr}"
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            target = fn.__globals__.get(sub.id)
            if isinstance(target, types.FunctionType) and _followable(target, self.folder):
                yield None, target, sub.id
            else:
                self._capability(target)

    def _capability(self, value) -> None:
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, Capability) and item.name not in self.tools_added:
                self.tools_added.append(item.name)


def _attr_types(cls: type, methods: dict, folder: Path) -> dict[str, type]:
    """self.x -> class, for ``self.x = SomeClass(...)`` and dataclass default factories that are classes."""
    out: dict[str, type] = {}
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if isinstance(f.default_factory, type) and _followable(f.default_factory, folder):
                out[f.name] = f.default_factory
    for _, fn in methods.values():
        parsed = _fn_ast(fn)
        if parsed is None:
            continue
        this = _self_name(parsed[0])
        for node in ast.walk(parsed[0]):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                klass = _resolve(node.value.func, fn)
                if isinstance(klass, type) and _followable(klass, folder):
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == this:
                            out[t.attr] = klass
    return out


def _resolve(expr: ast.AST, fn):
    if isinstance(expr, ast.Name):
        return fn.__globals__.get(expr.id)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return getattr(fn.__globals__.get(expr.value.id), expr.attr, None)
    return None


def _config(cls: type, methods: dict) -> dict[str, Any]:
    """Dataclass fields and public literal class attributes, valued on a fresh instance."""
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    for klass in reversed(cls.__mro__):
        if _skip(klass):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and name not in names and name not in methods \
                    and isinstance(value, _LITERALS):
                names.append(name)
    try:
        instance = cls()
    except Exception:  # noqa: BLE001 - harness code is arbitrary: fall back to class-level defaults
        instance = None
    out = {}
    for name in names:
        value = getattr(instance if instance is not None else cls, name, "<factory>")
        if isinstance(value, (list, tuple, dict)) and len(repr(value)) > 60:
            value = f"<{type(value).__name__} of {len(value)}>"
        out[name] = value
    return out


_STATE_ORDER = ("reset", "__init__", "__post_init__", "on_init")


def _state(cls: type, methods: dict, folder: Path, config: set[str]) -> dict[str, str]:
    """self.x assignments in any method -> 'method: initial value' (reset/__init__ first)."""
    out: dict[str, str] = {}
    order = [n for n in _STATE_ORDER if n in methods] + [n for n in methods if n not in _STATE_ORDER]
    for name in order:
        parsed = _fn_ast(methods[name][1])
        if parsed is None:
            continue
        this = _self_name(parsed[0])
        for node in ast.walk(parsed[0]):
            targets, value = [], None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets, value = [node.target], node.value
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            for t in flat:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == this \
                        and t.attr not in out and t.attr not in config:
                    text = ast.unparse(value) if value is not None and len(flat) == 1 else "..."
                    out[t.attr] = f"{name}: {text if len(text) <= 40 else text[:37] + '...'}"
    return out


def _reads(slot: str, protocol: dict, methods: dict, walker: _Walker) -> dict[str, bool]:
    """Which protocol inputs the module uses."""
    if slot == "A":
        return {k: k in walker.attributes for k in ("view", "directive", "capabilities", "hints", "observation")}
    out = {}
    for method, params in protocol.items():
        if not params or method not in methods:
            continue
        parsed = _fn_ast(methods[method][1])
        if parsed is None:
            out.update({p: True for p in params})  # unknown source: assume it is used
            continue
        node = parsed[0]
        args = [a.arg for a in node.args.posonlyargs + node.args.args][1:]
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        uses_star = node.args.vararg is not None or node.args.kwarg is not None
        for i, p in enumerate(params):
            out[p] = uses_star or (i < len(args) and args[i] in used)
    return out


def _constant_plan(methods: dict) -> bool:
    """True when every return of plan() is a Directive built from constants only (an empty planner)."""
    if "plan" not in methods:
        return False
    parsed = _fn_ast(methods["plan"][1])
    if parsed is None:
        return False
    returns = [n for n in ast.walk(parsed[0]) if isinstance(n, ast.Return)]

    def constant(expr) -> bool:
        return isinstance(expr, ast.Call) and all(
            isinstance(a, ast.Constant) for a in list(expr.args) + [k.value for k in expr.keywords])
    return bool(returns) and all(r.value is not None and constant(r.value) for r in returns)


def _first_doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    if doc.startswith(f"{cls.__name__}("):  # the signature @dataclass writes when there is no docstring
        doc = ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ").replace("``", "")
    # the library's docstrings open with their slot: "M: ...", "A (ROMA recursive execution): ..."
    line = re.sub(r"^[MPFAH]\s*(?:\(([^)]*)\))?\s*:\s*", lambda m: f"{m.group(1)}: " if m.group(1) else "", line)
    return line.strip()


def _doc_label(cls: type) -> str:
    line = _first_doc(cls)
    if not line:
        return f"custom {cls.__name__}"
    for sep in (";", ". ", ":"):
        line = line.split(sep)[0]
    line = line.rstrip(".").strip()
    return line if len(line) <= 32 else line[:31] + "..."


# ------------------------------------------------------------------------------------------------- table

def summary_row(folder: str | Path | Anatomy) -> dict:
    """One Table 2 row: name, the M/P/F/A labels, which slots call the backbone, which hooks exist."""
    a = folder if isinstance(folder, Anatomy) else anatomy(folder)
    return {"name": a.name, **{s: a.slots[s].label for s in "MPFA"},
            "calls_backbone": ", ".join(s for s, x in a.slots.items() if x.calls_backbone),
            "hooks": ", ".join(f"{h} ({'+'.join(slots)})" for h, slots in a.hooks.items() if slots)}


def table(folders=None):
    """Table 2 (harness x M/P/F/A) as a DataFrame; ``folders`` defaults to every seed in seed_bank/."""
    import pandas as pd
    rows = [summary_row(f) for f in (seed_names() if folders is None else folders)]
    return pd.DataFrame(rows, columns=["name", "M", "P", "F", "A", "calls_backbone", "hooks"])


def write_table(df, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``table2_seed_bank.md`` and ``table2_seed_bank.csv`` into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "table2_seed_bank.csv", out / "table2_seed_bank.md"
    df.to_csv(csv_path, index=False)
    md_path.write_text(markdown_table(df, empty="—") + "\n")
    return md_path, csv_path


def save_diagrams(folders=None, out_dir: str | Path = "figures/anatomy") -> list[Path]:
    """Write ``<out_dir>/<name>.svg`` for each harness (default: every seed); returns the paths."""
    return [(a := anatomy(f)).save(Path(out_dir) / f"{a.name}.svg")
            for f in (seed_names() if folders is None else folders)]


# --------------------------------------------------------------------------------------------------- SVG

_COLORS = {"M": "#3b6ea8", "P": "#d9822b", "F": "#3f8f4a", "A": "#a2478a", "H": "#6b6b6b"}
_TINT = {"M": "#eef3f9", "P": "#fcf3ea", "F": "#eef6ef", "A": "#f7eef5", "H": "#f3f3f3"}
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
_MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
_W, _BOX_W, _GAP, _X0 = 1164, 236, 40, 50


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0
_QUOTE = {'"': "&quot;"}


def _fit(text: str, chars: int) -> str:
    text = str(text)
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


def _wrap(text: str, chars: int, lines: int) -> list[str]:
    out = textwrap.wrap(text, chars)
    return out[:lines - 1] + [_fit(" ".join(out[lines - 1:]), chars)] if len(out) > lines else out


def _sym(symbol: str) -> str:
    """'v_t' -> v with a subscript t (as SVG tspans)."""
    base, _, sub = symbol.partition("_")
    return escape(base) + (f'<tspan baseline-shift="sub" font-size="75%">{escape(sub)}</tspan>' if sub else "")


class _Svg:
    def __init__(self):
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(self, x, y, s, size=11, weight="normal", fill="#222", anchor="start", family=_FONT, style="normal",
             raw=False) -> None:
        body = s if raw else escape(_CONTROL.sub("", str(s)))
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-family="{family}" font-size="{size}" font-weight="{weight}" '
                 f'font-style="{style}" fill="{fill}" text-anchor="{anchor}">{body}</text>')

    def rect(self, x, y, w, h, fill="#fff", stroke="#333", rx=6, width=1.2, dash=None) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{rx}" fill="{fill}" '
                 f'stroke="{stroke}" stroke-width="{width}"{d}/>')

    def path(self, d, stroke="#333", width=1.6, dash=None, arrow=True) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        marker = ' marker-end="url(#arrow)"' if arrow and not dash else ' marker-end="url(#arrow-grey)"' if arrow \
            else ""
        self.add(f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width}"{extra}{marker}/>')


def _box_lines(a: SlotAnatomy) -> list[tuple[str, str]]:
    """(kind, text) lines of one module box below its header."""
    chars = 34
    lines = [("label", _fit(a.label, 25)), ("class", _fit(f"{a.class_name}({', '.join(a.bases)})", chars))]
    lines += [("doc", t) for t in _wrap(a.doc, chars + 2, 3)]
    lines.append(("badge", ""))
    for call in a.backbone[:3]:
        lines.append(("call", _call_text(call, chars)))
    if len(a.backbone) > 3:
        lines.append(("more", f"+{len(a.backbone) - 3} more call sites"))
    if a.config:
        lines.append(("head", "config"))
        items = list(a.config.items())
        lines += [("mono", _fit(f"{k} = {v!r}", chars)) for k, v in items[:4]]
        if len(items) > 4:
            lines.append(("more", f"+{len(items) - 4} more"))
    lines.append(("head", "state"))
    if a.state:
        items = list(a.state.items())
        lines += [("mono", _fit(f"{k} ← {v.split(': ', 1)[1]}", chars)) for k, v in items[:4]]
        if len(items) > 4:
            lines.append(("more", f"+{len(items) - 4} more"))
    else:
        lines.append(("more", "none (stateless)"))
    if a.tools_added or a.tools_emitted:
        lines.append(("head", "tools"))
        if a.tools_added:
            lines.append(("mono", _fit("adds " + ", ".join(a.tools_added), chars)))
        if a.tools_emitted:
            lines.append(("mono", _fit("emits " + ", ".join(a.tools_emitted), chars)))
    lines.append(("head", "hooks"))
    lines.append(("mono", _fit(", ".join(a.hooks), chars)) if a.hooks else ("more", "none"))
    if a.overrides:
        lines.append(("more", _fit("* overrides " + ", ".join(a.overrides), chars)))
    return lines


_LINE_H = {"label": 20, "class": 16, "doc": 14, "badge": 26, "head": 18, "mono": 15, "more": 15, "call": 14}


def _call_text(call: BackboneCall, chars: int) -> str:
    """'act → to_decision → _nearest → score', eliding the middle of long paths."""
    path, middle = list(call.path), list(call.path[1:-1])
    text = " → ".join(path + [call.kind])
    while len(text) > chars and middle:
        middle.pop(0)
        text = " → ".join([path[0], "…", *middle, path[-1], call.kind])
    return _fit(text, chars)


def to_svg(a: Anatomy) -> str:
    """The anatomy as a standalone SVG document (text)."""
    svg = _Svg()
    boxes = {s: _box_lines(a.slots[s]) for s in "MPFA"}
    box_h = 34 + max(sum(_LINE_H[k] for k, _ in lines) for lines in boxes.values()) + 10
    top = 150
    xs = {s: _X0 + i * (_BOX_W + _GAP) for i, s in enumerate("MPFA")}
    bus_y = top + box_h + 26
    hooks_y = bus_y + 34
    env_y = hooks_y + 66
    height = env_y + 48 + 24

    # title
    svg.text(_X0, 34, escape(a.name) + '<tspan font-size="13" font-weight="normal" fill="#666" dx="10">'
             'harness anatomy · derived from code</tspan>', size=20, weight="bold", raw=True)
    lx0 = _W - _X0 - 330
    svg.path(f"M{lx0:.1f},{30:.1f} h30", stroke="#333", width=1.4)
    svg.text(lx0 + 36, 34, "input read by the module", size=10, fill="#555")
    svg.path(f"M{lx0 + 170:.1f},{30:.1f} h30", stroke="#aaa", width=1.4, dash="4,3")
    svg.text(lx0 + 206, 34, "ignored or constant (per code)", size=10, fill="#999")
    svg.text(_X0, 54, _fit(f"{_shown_path(a.folder)}  ·  sha {a.sha[:12]}", 120), size=10.5, fill="#888", family=_MONO)

    # backbone
    callers = [s for s in "MPFA" if a.slots[s].calls_backbone]
    hook_llm = "H" in a.slots and a.slots["H"].calls_backbone
    bb_w, bb_x, bb_y = 400, _W / 2 - 200, 72
    live = bool(callers) or hook_llm
    svg.rect(bb_x, bb_y, bb_w, 40, fill="#fff7e0" if live else "#f4f4f4", stroke="#b08a1e" if live else "#aaa",
             rx=20, width=1.6 if live else 1, dash=None if live else "5,4")
    svg.text(_W / 2, bb_y + 18, "Backbone (frozen LLM)", size=13, weight="bold", anchor="middle",
             fill="#6b5310" if live else "#999")
    svg.text(_W / 2, bb_y + 32, "ctx.llm.chat / ctx.llm.score — brokered, counted, cached" if live
             else "never called by this harness", size=10, anchor="middle", fill="#8a7336" if live else "#999")
    for s in callers:
        cx = xs[s] + _BOX_W / 2
        tx = min(max(cx, bb_x + 30), bb_x + bb_w - 30)
        svg.add(f'<path d="M{cx:.1f},{top:.1f} C{cx:.1f},{top - 22:.1f} {tx:.1f},{bb_y + 62:.1f} '
                f'{tx:.1f},{bb_y + 42:.1f}" fill="none" stroke="#b08a1e" stroke-width="1.5" '
                f'stroke-dasharray="6,3" marker-end="url(#arrow-gold)"/>')
        kinds = " + ".join(a.slots[s].backbone_kinds)
        svg.text(cx + (8 if cx >= tx else -8), top - 10, kinds, size=10.5, fill="#8a6a12", weight="bold",
                 anchor="start" if cx >= tx else "end")

    # module boxes
    for s in "MPFA":
        x, sl = xs[s], a.slots[s]
        svg.rect(x, top, _BOX_W, box_h, fill=_TINT[s], stroke=_COLORS[s], width=1.6, rx=8)
        svg.add(f'<path d="M{x:.1f},{top + 28:.1f} v-20 a8,8 0 0 1 8,-8 h{_BOX_W - 16:.1f} a8,8 0 0 1 8,8 v20 z" '
                f'fill="{_COLORS[s]}"/>')
        svg.text(x + 10, top + 19, f"{sl.role}", size=13, weight="bold", fill="#fff")
        svg.text(x + _BOX_W - 10, top + 19, s, size=13, weight="bold", fill="#fff", anchor="end")
        y = top + 34
        for kind, text in boxes[s]:
            h = _LINE_H[kind]
            if kind == "label":
                svg.text(x + 10, y + 15, text, size=15, weight="bold", fill=_COLORS[s])
            elif kind == "class":
                svg.text(x + 10, y + 12, text, size=10, family=_MONO, fill="#555")
            elif kind == "doc":
                svg.text(x + 10, y + 11, text, size=10, fill="#666", style="italic")
            elif kind == "badge":
                if sl.calls_backbone:
                    label = "calls backbone: " + " + ".join(sl.backbone_kinds)
                    svg.rect(x + 10, y + 5, 7 * len(label) * 0.92 + 14, 17, fill="#fff1c9", stroke="#b08a1e", rx=8.5,
                             width=1)
                    svg.text(x + 17, y + 17.5, label, size=10, weight="bold", fill="#7a5c0c")
                else:
                    svg.rect(x + 10, y + 5, 118, 17, fill="#ffffff", stroke="#bbb", rx=8.5, width=1)
                    svg.text(x + 17, y + 17.5, "no backbone call", size=10, fill="#888")
            elif kind == "head":
                svg.text(x + 10, y + 13, text.upper(), size=9, weight="bold", fill=_COLORS[s])
                svg.add(f'<line x1="{x + 16 + 6.5 * len(text):.1f}" y1="{y + 10:.1f}" x2="{x + _BOX_W - 10:.1f}" '
                        f'y2="{y + 10:.1f}" stroke="{_COLORS[s]}" stroke-opacity="0.25"/>')
            elif kind == "call":
                svg.text(x + 12, y + 10, text, size=9.5, family=_MONO, fill="#7a5c0c")
            elif kind == "mono":
                svg.text(x + 12, y + 11, text, size=10, family=_MONO, fill="#222")
            else:
                svg.text(x + 12, y + 11, text, size=10, fill="#888", style="italic")
            y += h

    # chain arrows v_t -> d_t -> C_t
    edges = {(e.src, e.dst): e for e in a.flow}
    ay = top + 60
    for src, dst in (("M", "P"), ("P", "F"), ("F", "A")):
        e = edges[(src, dst)]
        x1, x2 = xs[src] + _BOX_W + 2, xs[dst] - 3
        svg.path(f"M{x1:.1f},{ay:.1f} H{x2:.1f}", stroke="#333" if e.used else "#aaa", dash=None if e.used else "4,3")
        svg.text((x1 + x2) / 2, ay - 7, _sym(e.symbol), size=14, anchor="middle", raw=True,
                 fill="#222" if e.used else "#aaa", style="italic", family="DejaVu Serif, Times, serif")

    # context bus: v_t, d_t also go straight into the action's context
    bus = [(src, edges[(src, "A")]) for src in ("M", "P") if edges[(src, "A")].used]
    if bus:
        ax = xs["A"] + _BOX_W / 2
        for src, e in bus:
            sx = xs[src] + _BOX_W / 2
            svg.path(f"M{sx:.1f},{top + box_h:.1f} V{bus_y:.1f}", stroke="#777", width=1.2, arrow=False)
            svg.text(sx + 6, bus_y - 6, _sym(e.symbol), size=12, raw=True, fill="#555", style="italic",
                     family="DejaVu Serif, Times, serif")
        left = min(xs[src] + _BOX_W / 2 for src, _ in bus)
        svg.path(f"M{left:.1f},{bus_y:.1f} H{ax:.1f} V{top + box_h + 3:.1f}", stroke="#777", width=1.2)
        svg.text(ax - 8, bus_y - 6, "context for A", size=10, fill="#777", anchor="end", style="italic")

    # lifecycle hooks band
    svg.rect(_X0, hooks_y, _W - 2 * _X0, 36, fill="#fafafa", stroke="#ccc", rx=6, width=1)
    svg.text(_X0 + 12, hooks_y + 22, "lifecycle hooks", size=11, weight="bold", fill="#555")
    px = _X0 + 120
    for h in HOOKS:
        owners = a.hooks[h]
        label = f"{h}" + (f" · {'+'.join(owners)}" if owners else "")
        if owners and hook_llm and "H" in owners:
            label += " · LLM"
        w = 7.0 * len(label) + 22
        if owners:
            color = _COLORS[owners[0]]
            svg.rect(px, hooks_y + 7, w, 22, fill=color, stroke=color, rx=11, width=1)
            svg.text(px + w / 2, hooks_y + 22, label, size=11, fill="#fff", anchor="middle", family=_MONO)
        else:
            svg.rect(px, hooks_y + 7, w, 22, fill="#fff", stroke="#bbb", rx=11, width=1, dash="3,3")
            svg.text(px + w / 2, hooks_y + 22, label, size=11, fill="#aaa", anchor="middle", family=_MONO)
        px += w + 14

    # environment and the loop
    env_x, env_w = _X0 + 210, _W - 2 * _X0 - 420
    svg.rect(env_x, env_y, env_w, 48, fill="#f1f1ee", stroke="#555", width=1.4, rx=8)
    svg.text(_W / 2, env_y + 21, "Environment", size=14, weight="bold", anchor="middle", fill="#333")
    svg.text(_W / 2, env_y + 38, "steps the tool call, returns the next observation (trusted parent process)",
             size=10, anchor="middle", fill="#777")
    ex, ey = xs["A"] + _BOX_W, top + box_h / 2
    rx_ = _W - 18
    svg.path(f"M{ex:.1f},{ey:.1f} H{rx_:.1f} V{env_y + 24:.1f} H{env_x + env_w + 3:.1f}", stroke="#333")
    svg.text(rx_ - 12, env_y + 16, _sym("e_t") + " = Decision(tool, args)", size=11, raw=True,
             fill="#333", anchor="end")
    lx = 18
    svg.path(f"M{env_x:.1f},{env_y + 24:.1f} H{lx:.1f} V{ay:.1f} H{xs['M'] - 3:.1f}", stroke="#333")
    svg.text(lx + 12, env_y + 16, _sym("o_t+1") + " observation → M.update", size=11, raw=True, fill="#333")

    defs = ('<defs>'
            '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>'
            '<marker id="arrow-grey" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#aaa"/></marker>'
            '<marker id="arrow-gold" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#b08a1e"/></marker>'
            '</defs>')
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height:.0f}" '
            f'viewBox="0 0 {_W} {height:.0f}" role="img" aria-label="anatomy of harness {escape(a.name, _QUOTE)}">'
            f'<title>{escape(a.name)}: harness anatomy</title>{defs}'
            f'<rect width="100%" height="100%" fill="#ffffff"/>')
    return head + "".join(svg.parts) + "</svg>\n"
