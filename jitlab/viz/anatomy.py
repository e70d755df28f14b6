"""Harness anatomy: what fills M, P, F, A in a harness folder, derived from its code, and a diagram of it.

    from jitlab.viz.anatomy import anatomy
    a = anatomy("react")                  # a seed name or any harness folder (generated ones too)
    a                                     # JupyterLab shows the SVG diagram inline (_repr_svg_)
    a.save("figures/anatomy/react.svg")
    print(a.describe())                   # the same facts as text

This module is the analysis; the diagram is drawn by :mod:`jitlab.viz.anatomy_svg` and Table 2 (plus one
diagram file per seed) is written by :mod:`jitlab.viz.anatomy_table`.

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

from jitlab.errors import HarnessError
from jitlab.harness import Harness, load_harness
from jitlab.paths import package_root, repo_root
from jitlab.protocol import HOOKS, Capability
from jitlab.protocol import SLOTS as PROTOCOL_SLOTS
from jitlab.resolve import parse_source, vendored_names
from jitlab.viz.anatomy_svg import to_svg

__all__ = ["SLOTS", "Anatomy", "BackboneCall", "FlowEdge", "SlotAnatomy", "anatomy"]

# slot letter -> (key in Harness.classes, role, file, protocol methods with their input parameters), from the slot
# table (jitlab.protocol.SLOTS)
SLOTS = {s.letter: (s.key, s.cls, s.file, s.methods) for s in PROTOCOL_SLOTS.values()}
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
