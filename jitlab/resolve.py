"""Resolved harness source: a harness folder with the library code it uses written out inside it.

    from jitlab.resolve import resolve_files
    files = resolve_files(read_files("jitlab/seeds/resum"))   # {file name: text}, no ``jitlab.modules`` import left

This module works on file texts only (it imports no other jitlab module but errors); reading folders and
regenerating ``seed_bank/`` from ``jitlab/seeds/`` are in :mod:`jitlab.harness` (``resolve_folder``,
``regenerate_seeds``), which builds on this one.

Mechanism: **inlining**. Each module file keeps its own code (``class Memory(PeriodicSummaryMemory): ...``)
and gains, above it, every library definition it reaches: the classes it inherits, the functions,
classes and constants those use, transitively, copied verbatim from ``jitlab/modules/*.py`` (with their
comments and docstrings), each under a ``# library: jitlab.modules.<module>.<name>`` marker. Why inlining
rather than a per-harness ``_lib.py``: a reader opens ``memory.py`` and reads the whole memory top to
bottom in one file, and the harness's files stay the four the protocol names, so every tool that reads a
harness folder (sandbox, bank, anatomy, diff) needs no change. Why not seeds written out by hand: the
module library stays the one source that the compose and plan generators build from; the resolved
seeds are generated from it (``jitlab harnesses regenerate``) and a test fails when they are stale.

What stays an import: the standard library, :mod:`jitlab.protocol` and :mod:`jitlab.harnesskit` (text
clipping, reply parsing, template rendering). The library's ``render_prompt`` falls back to the templates
in ``jitlab/modules/templates``; a resolved harness uses ``jitlab.harnesskit.render_prompt`` instead,
which reads ``prompt.yaml`` only, so each library template the resolved code names is appended to the
folder's ``prompt.yaml`` (keys the harness already defines win, as before).

Deterministic: definitions are emitted depth-first in source order, imports sorted, so resolving the
same folder against the same library gives byte-identical files. A file with no ``jitlab.modules`` import
is returned unchanged (resolution is idempotent). :func:`jitlab.harness.harness_sha` hashes the resolved
files, so a change to library code a harness uses changes that harness's identity.

Caveats: only ``from jitlab.modules.<m> import <name>`` is understood (``import jitlab.modules.x`` is a
ResolveError). Names are resolved statically: a local variable that shares a module-level name pulls
that definition in too (harmless). A harness that defines a top-level name the library code it inherits
also defines (say its own ``history_text``) cannot be inlined without changing what the library code
calls; that is a ResolveError naming the clash.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from jitlab import safe_yaml
from jitlab.errors import HarnessError
from jitlab.modules.prompting import TEMPLATE_DIR
from jitlab.protocol import SLOTS

__all__ = ["LIBRARY_PREFIX", "ResolveError", "parse_source", "resolve_file", "resolve_files", "resolved_or_raw",
           "thin_file", "vendored_names"]

LIBRARY_PREFIX = "jitlab.modules"
# modules whose names a resolved harness may import as they are
_KEPT = ("__future__", "jitlab.protocol", "jitlab.harnesskit")
# library names replaced by a harnesskit name (the harnesskit version reads prompt.yaml only; the templates
# the code names are copied into prompt.yaml)
_SUBSTITUTE = {("jitlab.modules.text", "render_prompt"): ("jitlab.harnesskit", "render_prompt")}
# library names whose meaning depends on where the library sits: a resolved copy would read the wrong folder
_REFUSED = {("jitlab.modules.prompting", "render_file"): "use render_prompt(ctx.prompts, key, ...) (the resolver "
            "copies the library template into prompt.yaml)",
            ("jitlab.modules.prompting", "TEMPLATE_DIR"): "a resolved harness reads its prompts from prompt.yaml"}
_RESOLVED_FILES = tuple(s.file for s in SLOTS.values())
_MARKER = "# library: "
_HEADER = ("# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve "
           "(`jitlab harnesses export`) ----")
_OWN = "# ---- the harness's own code ----"
_TEMPLATES_NOTE = ("# Library prompts the code above uses, copied from jitlab/modules/templates/ by jitlab.resolve "
                   "(a key defined above wins).")


_AST_LOCK = threading.Lock()


def parse_source(text: str) -> ast.Module:
    """``ast.parse`` under a process-wide lock: CPython 3.11 builds AST objects with state shared between
    threads and may raise a spurious "SystemError: AST constructor recursion depth mismatch" when two threads
    parse at once (python/cpython#106905); JIT generates and hashes candidates in threads."""
    with _AST_LOCK:
        return ast.parse(text)


class ResolveError(HarnessError):
    """A harness file cannot be resolved (syntax error, unsupported import, name clash)."""


# ----------------------------------------------------------------------------------------------- library index

@dataclass(frozen=True)
class _Def:
    module: str
    name: str
    lineno: int
    source: str                    # verbatim text, decorators and the comment lines right above included
    refs: tuple[str, ...]          # names it uses, in first-use order


@dataclass(frozen=True)
class _Module:
    name: str
    defs: dict                     # name -> _Def
    imports: dict                  # bound name -> (module, original name or None for `import x`)


def _library_source(module: str, sources: dict | None) -> str:
    if sources and module in sources:
        return sources[module]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ResolveError(f"library module {module} not found")
    return Path(spec.origin).read_text()


def _index(module: str, sources: dict | None) -> _Module:
    return _parse_module(module, _library_source(module, sources))


@lru_cache(maxsize=64)
def _parse_module(module: str, text: str) -> _Module:
    tree = parse_source(text)
    lines = text.splitlines()
    defs, imports = {}, {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            for alias in node.names:
                imports[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imports[alias.asname or alias.name.split(".")[0]] = (alias.name if alias.asname else
                                                                    alias.name.split(".")[0], None)
        else:
            for name in _bound(node):
                if name != "__all__":
                    defs[name] = _Def(module, name, node.lineno, _segment(lines, node), tuple(_refs(node)))
    return _Module(module, defs, imports)


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")[: -node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    out = []
    for t in targets:
        out += [e.id for e in ast.walk(t) if isinstance(e, ast.Name)]
    return out


def _segment(lines: list[str], node: ast.stmt) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return "\n".join(lines[first: node.end_lineno])


def _refs(node: ast.AST) -> list[str]:
    seen: dict[str, None] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            seen.setdefault(sub.id)
    return list(seen)


# ---------------------------------------------------------------------------------------------------- resolve

class _Resolver:
    """Collects, for one harness file, the library definitions and the imports they need."""

    def __init__(self, file: str, sources: dict | None):
        self.file, self.sources = file, sources
        self.order: list[_Def] = []                 # depth-first post-order: dependencies first
        self.seen: set[tuple[str, str]] = set()
        self.bound: dict[str, str] = {}             # name in the resolved file -> "module.name" it stands for
        self.imports: set[tuple[str, str | None, str]] = set()   # (module, name or None, bound name)
        self.aliases: dict[str, str] = {}           # alias -> vendored name (`import X as _Base`)

    def name(self, module: str, name: str, bound: str, depth: int = 0) -> None:
        """Make ``bound`` in the resolved file stand for ``module.name``."""
        if depth > 20:
            raise ResolveError(f"import chain too deep resolving {module}.{name}", file=self.file)
        module, name = _SUBSTITUTE.get((module, name), (module, name))
        if not module.startswith(LIBRARY_PREFIX + ".") and module != LIBRARY_PREFIX:
            if not (module.split(".")[0] in sys.stdlib_module_names or module in _KEPT):
                raise ResolveError(f"{module}.{name} is neither the standard library, jitlab.protocol nor "
                                   "jitlab.harnesskit; a resolved harness cannot import it", file=self.file)
            self._claim(bound, f"{module}.{name}")
            self.imports.add((module, name, bound))
            return
        if (module, name) in _REFUSED:
            raise ResolveError(f"{module}.{name}: {_REFUSED[(module, name)]}", file=self.file, kind="import_error")
        index = _index(module, self.sources)
        if name in index.defs:
            self._vendor(index.defs[name])
            if bound != name:  # `from jitlab.modules.x import Name as _Base`: keep the alias the file uses
                self._claim(bound, f"{module}.{name}")
                self.aliases[bound] = name
        elif name in index.imports:
            source, original = index.imports[name]
            if original is None:
                raise ResolveError(f"{module} imports module {source}; only names are resolved", file=self.file)
            self.name(source, original, bound, depth + 1)
        else:
            raise ResolveError(f"{module} has no top-level name {name!r}", file=self.file)

    def _claim(self, bound: str, meaning: str) -> None:
        if self.bound.setdefault(bound, meaning) != meaning:
            raise ResolveError(f"name clash: {bound!r} would stand for both {self.bound[bound]} and {meaning}",
                               file=self.file)

    def _vendor(self, d: _Def) -> None:
        key = (d.module, d.name)
        if key in self.seen:
            return
        self.seen.add(key)
        self._claim(d.name, f"{d.module}.{d.name}")
        index = _index(d.module, self.sources)
        for ref in d.refs:
            if ref == d.name:
                continue
            if ref in index.defs:
                self._vendor(index.defs[ref])
            elif ref in index.imports:
                source, original = index.imports[ref]
                if original is None:
                    self._claim(ref, source)
                    self.imports.add((source, None, ref))
                else:
                    self.name(source, original, ref)
        self.order.append(d)


def resolve_file(text: str, file: str = "module.py", sources: dict | None = None) -> str:
    """One harness module file with the library code it uses inlined (unchanged when it imports none).

    ``sources`` maps library module names to replacement source text (tests edit the library this way)."""
    if sources is None:  # harness_sha calls this for every sha; the library's files do not change in a process
        return _resolve_cached(text, file)
    return _resolve(text, file, sources)


@lru_cache(maxsize=1024)
def _resolve_cached(text: str, file: str) -> str:
    return _resolve(text, file, None)


def _resolve(text: str, file: str, sources: dict | None) -> str:
    try:
        tree = parse_source(text)
    except SyntaxError as exc:
        raise ResolveError(f"syntax error line {exc.lineno}: {exc.msg}", file=file, kind="parse_error") from exc
    except (ValueError, RecursionError) as exc:  # null bytes, absurd nesting
        raise ResolveError(f"cannot parse: {exc}", file=file, kind="parse_error") from exc
    library = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and _is_library(n)]
    nested = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and _is_library(n)
              and n not in library]
    if nested:
        raise ResolveError(f"line {nested[0].lineno}: import jitlab.modules at the top level of the file "
                           "(imports inside functions are not resolved)", file=file, kind="import_error")
    if not library:
        return text
    resolver = _Resolver(file, sources)
    for node in library:
        if isinstance(node, ast.Import) or node.level:
            raise ResolveError(f"line {node.lineno}: write `from jitlab.modules.<module> import <Name>`",
                               file=file, kind="import_error")
        for alias in node.names:
            if alias.name == "*":
                raise ResolveError(f"line {node.lineno}: `import *` from {node.module} cannot be resolved",
                                   file=file, kind="import_error")
            resolver.name(node.module, alias.name, alias.asname or alias.name)
    lines = text.splitlines()
    docstring, own_imports, own = None, [], []
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
            isinstance(body[0].value.value, str):
        docstring = "\n".join(lines[body[0].lineno - 1: body[0].end_lineno])
        body = body[1:]
    for node in body:
        if node in library:
            continue
        if isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                resolver.imports.add((node.module, alias.name, alias.asname or alias.name))
            _own_names(resolver, [alias.asname or alias.name for alias in node.names], node, file)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                resolver.imports.add((alias.name if alias.asname else bound, None, bound))
        else:
            _own_names(resolver, _bound(node), node, file)
            own.append(_segment(lines, node))
            continue
        own_imports.append(node)
    head = (docstring + "\n" if docstring else "") + _format_imports(resolver.imports)
    vendored = "\n\n\n".join(f"{_MARKER}{d.module}.{d.name}\n{d.source}" for d in resolver.order)
    if resolver.aliases:
        own.insert(0, "\n".join(f"{alias} = {name}" for alias, name in sorted(resolver.aliases.items())))
    parts = [head, f"{_HEADER}\n\n{vendored}", f"{_OWN}\n\n" + "\n\n\n".join(own) if own else _OWN]
    return parts[0] + "\n\n" + "\n\n\n".join(parts[1:]) + "\n"


def _is_library(node) -> bool:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(n == LIBRARY_PREFIX or n.startswith(LIBRARY_PREFIX + ".") for n in names)


def _own_names(resolver: _Resolver, names: list[str], node: ast.stmt, file: str) -> None:
    for name in names:
        if name in resolver.bound and not isinstance(node, (ast.Import, ast.ImportFrom)):
            raise ResolveError(f"line {node.lineno}: {name!r} is also defined by the library code this file "
                               f"inherits ({resolver.bound[name]}); rename yours", file=file)


def _format_imports(imports: set) -> str:
    future = sorted(name for module, name, _ in imports if module == "__future__")
    plain = sorted({(m, b) for m, n, b in imports if n is None})
    froms: dict[str, set[str]] = {}
    for module, name, bound in imports:
        if name is not None and module != "__future__":
            froms.setdefault(module, set()).add(name if bound == name else f"{name} as {bound}")
    if "annotations" not in future:  # the library is written with postponed annotations
        future.append("annotations")
    stdlib = [m for m in sorted(froms) if m.split(".")[0] in sys.stdlib_module_names]
    other = [m for m in sorted(froms) if m not in stdlib]
    blocks = [[f"from __future__ import {', '.join(sorted(future))}"]]
    blocks.append([f"import {m}" if m == b else f"import {m} as {b}" for m, b in plain
                   if m.split(".")[0] in sys.stdlib_module_names] + [_from_line(m, froms[m]) for m in stdlib])
    blocks.append([f"import {m}" if m == b else f"import {m} as {b}" for m, b in plain
                   if m.split(".")[0] not in sys.stdlib_module_names] + [_from_line(m, froms[m]) for m in other])
    return "\n\n".join("\n".join(b) for b in blocks if b)


def _from_line(module: str, names: set[str]) -> str:
    ordered = sorted(names, key=lambda n: (not n[:1].isupper(), n.lower()))
    line = f"from {module} import {', '.join(ordered)}"
    if len(line) <= 120:
        return line
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"


# ------------------------------------------------------------------------------------------- prompts, folders

def _template_dir() -> Path:
    return TEMPLATE_DIR


def _prompt_keys(text: str) -> list[str]:
    """Keys the code may pass to ``render_prompt(prompts, key, ...)``: the literal keys and, when some call
    passes a computed key (``self._write(view, ctx, "plan")`` -> ``render_prompt(ctx.prompts, kind, ...)``),
    every string literal of the file (the caller keeps only those that name a library template)."""
    tree = parse_source(text)
    keys: dict[str, None] = {}
    computed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and (
                getattr(node.func, "id", None) == "render_prompt" or getattr(node.func, "attr", None) == "render_prompt"):
            key = node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.setdefault(key.value)
            else:
                computed = True
    if computed:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                keys.setdefault(node.value)
    return list(keys)


def _yaml_entry(key: str, text: str) -> str:
    """``key: |`` block (readable) when it round-trips through YAML, else PyYAML's quoted form."""
    body = text.rstrip("\n")
    if body and not body[0].isspace() and "\t" not in body and "\r" not in body:
        block = f"{key}: |\n" + "".join(f"  {line}\n" if line else "\n" for line in body.split("\n"))
        try:
            if yaml.safe_load(block) == {key: body + "\n"}:
                return block
        except yaml.YAMLError:
            pass
    return yaml.safe_dump({key: text}, sort_keys=False, allow_unicode=True, width=1000)


def _with_templates(prompt_yaml: str, modules: list[str]) -> str:
    """prompt.yaml plus each library template the resolved code names that it does not define."""
    try:
        prompts = safe_yaml.load(prompt_yaml) or {}
    except yaml.YAMLError:
        return prompt_yaml  # the loader reports it (an alias too)
    if not isinstance(prompts, dict):
        return prompt_yaml
    wanted: dict[str, None] = {}
    for text in modules:
        try:
            for key in _prompt_keys(text):
                wanted.setdefault(key)
        except SyntaxError:
            continue
    folder = _template_dir()
    add = [k for k in wanted if k not in prompts and (folder / f"{k}.j2").is_file()]
    if not add:
        return prompt_yaml
    entries = "".join(_yaml_entry(k, (folder / f"{k}.j2").read_text()) for k in add)
    return prompt_yaml.rstrip("\n") + "\n\n" + _TEMPLATES_NOTE + "\n" + entries


def resolve_files(files: dict[str, str], sources: dict | None = None) -> dict[str, str]:
    """A harness's files ({name: text}) with the module files resolved and prompt.yaml completed."""
    out = dict(files)
    for name in _RESOLVED_FILES:
        if name in out:
            out[name] = resolve_file(out[name], name, sources)
    if "prompt.yaml" in out and any(out[n] != files[n] for n in _RESOLVED_FILES if n in files):
        out["prompt.yaml"] = _with_templates(out["prompt.yaml"], [out[n] for n in _RESOLVED_FILES if n in out])
    return out


def resolved_or_raw(files: dict[str, str]) -> dict[str, str]:
    """``resolve_files(files)``, or the files as they are when they do not resolve (a syntax error, say:
    whoever loads them reports it)."""
    try:
        return resolve_files(files)
    except ResolveError:
        return dict(files)


def thin_file(text: str, line: int | None = None) -> tuple[str, int | None]:
    """A resolved module file in thin form: its head (docstring, imports), a ``from jitlab.modules.<m> import
    <names>`` line for the library definitions its own code names, and its own code; the written-out library code is
    left out, so resolving the thin file writes it back in. Also ``line`` of the resolved file moved to the thin one
    (None when it is None or falls in the library code). Unchanged when the file inlines nothing."""
    lines = text.splitlines()
    if _HEADER not in lines or _OWN not in lines:
        return text, line
    start = lines.index(_OWN)
    head, own = lines[:lines.index(_HEADER)], lines[start:]
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(own[1:])))
    froms: dict[str, set[str]] = {}
    for name, dotted in vendored_names(text).items():
        if name in used:
            froms.setdefault(dotted.rsplit(".", 1)[0], set()).add(name)
    while head and not head[-1].strip():
        head.pop()
    thin = [*head, *(_from_line(m, names) for m, names in sorted(froms.items())), "", "", *own]
    moved = line - start + len(thin) - len(own) if line is not None and line > start else None
    return "\n".join(thin) + "\n", moved


def vendored_names(text: str) -> dict[str, str]:
    """{name: "jitlab.modules.<module>.<name>"} for the library definitions a resolved file inlines."""
    out = {}
    lines = text.splitlines()
    for line in lines:
        if line.startswith(_MARKER):
            dotted = line[len(_MARKER):].strip()
            out[dotted.rsplit(".", 1)[-1]] = dotted
    return out
