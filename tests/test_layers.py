"""The package's shape, checked statically: no import cycle among jitlab modules, and each layer imports only the
layers below it. The import graph is built from every ``import`` / ``from`` node of every module's AST, including
imports inside functions (which run lazily, so an import-at-runtime test would not see their cycles).

Layers, from the bottom up: the foundation (core modules jitlab/*.py and the families llm, envs, modules, sandbox,
seeds, seed_bank), then jit, then experiments.py and batch.py (which run grids and notebooks), then viz, train and
engineer, then cli, then the package root (jitlab/__init__.py, which re-exports a few starting names lazily; an
import of the root itself is no edge, since importing any jitlab module imports it first). A module may import its
own layer and the layers below it, except that viz only reads runs back: it imports none of the modules that start
one (runner, jit.inference and its loop and worker, cluster, experiments, batch).
Inside the foundation: the families llm, envs and modules build on core only, a resolved seed imports only
jitlab.protocol and jitlab.harnesskit, and protocol.py and errors.py import no jitlab module. The core files are
ordered with the families: the kernel (core files that import no family) below llm, envs, modules and seed_bank, seeds
above modules, the core files that build on a family (UPPER_CORE) above the families, then sandbox, then runner.

A jitlab import inside a function hides a file's dependencies: one is allowed only in the files of INLINE, each with
its reason (CONTRIBUTING.md, "Imports").
"""
from __future__ import annotations

import ast
from pathlib import Path

import jitlab

ROOT = Path(jitlab.__file__).parent
FAMILIES = ("llm", "envs", "modules", "sandbox", "seeds", "seed_bank")
# the package root (jitlab/__init__.py) is the front door: it re-exports a few names from any layer, lazily
RANK = {"core": 0, **{f: 0 for f in FAMILIES}, "jit": 1, "experiments": 2, "batch": 2, "viz": 3, "train": 3,
        "engineer": 3, "cli": 4, "root": 5}
# inside the foundation: what each family may import besides itself
ALLOWED = {"llm": {"core"}, "envs": {"core"}, "modules": {"core"}}
SEED_IMPORTS = {"jitlab.protocol", "jitlab.harnesskit"}
# inside the foundation, from the bottom up: the kernel (every core file not named below: protocol, errors, fields,
# paths, plumbing, stats, ...), the families llm, envs, modules and seed_bank (on the kernel only), seeds (built from
# modules), the core files that build on a family (UPPER_CORE), sandbox (runs a harness with the runtime and the
# harness loader), then runner (drives episodes in the sandbox)
UPPER_CORE = {"jitlab.resolve": "modules (the prompt templates)", "jitlab.runtime": "llm (the replay cache key)",
              "jitlab.store": "envs (suite versions)", "jitlab.harness": "resolve", "jitlab.card": "store, harness",
              "jitlab.compare": "store", "jitlab.export": "store", "jitlab.run_options": "runtime, store",
              "jitlab.gap": "compare, envs (a mix's parts)"}
TIER = {"kernel": 0, "llm": 1, "envs": 1, "modules": 1, "seed_bank": 1, "seeds": 2, "upper core": 3, "sandbox": 4,
        "runner": 5}
# what viz must not import: the modules that start runs (viz reads their records back)
RUNS_STARTERS = {"jitlab.runner", "jitlab.jit.inference", "jitlab.jit.loop", "jitlab.jit.worker", "jitlab.cluster",
                 "jitlab.experiments", "jitlab.batch"}


_LAZY_CLI = "lazy: a command's own modules (jitlab --help imports this file, not them)"
_LAZY_HELP = "lazy: jitlab --help imports this file (for its config's options); what a run needs comes on first use"
# the files where a jitlab import inside a function is allowed, and why; any other file imports jitlab at its top
INLINE = {
    "__init__.py": "lazy: the package root re-exports on first use (import jitlab stays fast)",
    "sandbox/__init__.py": "lazy: the parent-side names load on first use (the sandbox child imports this package)",
    "sandbox/child.py": "order: harness code and the runtime load only after the seccomp filter is in",
    "harness.py": "lazy: jitlab --help and the sandbox child import this file; resolve loads when a seed is resolved",
    "viz/dash/__init__.py": "lazy: panel, holoviews (the dashboard views)",
    "viz/dash/server.py": "lazy: panel, holoviews (the dashboard views); jitlab --help imports this file",
    **dict.fromkeys(["cli/bank.py", "cli/compare.py", "cli/engineer.py", "cli/jit.py", "cli/run.py", "cli/train.py",
                     "cli/viz.py"], _LAZY_CLI),
    **dict.fromkeys(["batch.py", "jit/config.py", "jit/generate/base.py", "engineer/loop.py", "engineer/table.py",
                     "engineer/transfer.py"], _LAZY_HELP),
}


def module_names() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("jitlab",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _target(name: str, modules) -> str | None:
    """The jitlab module an imported dotted name refers to (the longest prefix that is a module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        # imports under `if TYPE_CHECKING:` never run (annotations only), so they make no runtime dependency
        typing_only = {id(n) for top in ast.walk(tree) if isinstance(top, ast.If) and
                       getattr(top.test, "id", getattr(top.test, "attr", None)) == "TYPE_CHECKING"
                       for n in ast.walk(top)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                # `from pkg import sub` imports the submodule pkg.sub when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                # an edge to the root says nothing: importing any jitlab module imports the root first
                if t.startswith("jitlab") and (m := _target(t, modules)) and m not in (name, "jitlab"):
                    graph[name].add(m)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    if module == "jitlab":
        return "root"
    if len(parts) == 1 or (len(parts) == 2 and parts[1] not in RANK):
        return "core"
    return parts[1]


def test_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles (imports inside functions count):\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_subpackage_has_a_layer():
    """A new subpackage must be placed in a layer (RANK) before its imports can be checked."""
    unplaced = sorted({layer(m) for m in module_names()} - set(RANK))
    assert not unplaced, f"subpackages without a layer in tests/test_layers.py RANK: {unplaced}"


def test_layers_import_only_downwards():
    bad = [f"{a} ({layer(a)}) imports {b} ({layer(b)})" for a, targets in import_graph().items() for b in sorted(targets)
           if RANK.get(layer(b), 0) > RANK.get(layer(a), 0) and b != "jitlab"]
    assert not bad, "imports against the layers (core + families < jit < experiments, batch < viz, train, " \
                    "engineer < cli):\n" + "\n".join(bad)


def tier(module: str) -> str:
    """A foundation module's tier (TIER); the core files split into the kernel, UPPER_CORE and the runner."""
    if layer(module) != "core":
        return layer(module)
    if module == "jitlab.runner":
        return "runner"
    return "upper core" if module in UPPER_CORE else "kernel"


def test_the_foundation_is_ordered_too():
    """Core files are not one flat layer: the kernel imports no family, the families import only the kernel (and
    seeds modules), and a core file that builds on a family (UPPER_CORE, with what it needs) sits above it, so e.g.
    runtime, store and resolve never become a way for a family to import another."""
    graph = import_graph()
    foundation = [m for m in graph if RANK.get(layer(m)) == 0 and m != "jitlab"]
    bad = [f"{a} ({tier(a)}) imports {b} ({tier(b)})" for a in foundation for b in sorted(graph[a])
           if RANK.get(layer(b)) == 0 and TIER[tier(b)] > TIER[tier(a)]]
    assert not bad, "imports against the foundation's order (kernel < families < seeds < upper core < sandbox < " \
                    "runner; a core file that imports a family goes in UPPER_CORE):\n" + "\n".join(bad)
    assert set(UPPER_CORE) <= set(graph), f"UPPER_CORE names no such module: {sorted(set(UPPER_CORE) - set(graph))}"


def test_viz_only_reads():
    """viz draws and tabulates saved records; running grids, JIT modes and notebook batches is experiments/batch."""
    bad = [f"{a} imports {b}" for a, targets in import_graph().items() if layer(a) == "viz"
           for b in sorted(targets & RUNS_STARTERS)]
    assert not bad, "viz imports a module that starts runs (move the runner to jitlab/experiments.py):\n" + \
        "\n".join(bad)


def test_families_build_on_core_only():
    graph = import_graph()
    bad = [f"{a} imports {b}" for a, targets in graph.items() for b in sorted(targets)
           if layer(a) in ALLOWED and layer(b) != layer(a) and layer(b) not in ALLOWED[layer(a)]]
    bad += [f"{a} imports {b}" for a, targets in graph.items() if layer(a) == "seed_bank" for b in sorted(targets)
            if b not in SEED_IMPORTS and not b.startswith("jitlab.seed_bank")]
    bad += [f"{a} imports {b}" for a in ("jitlab.protocol", "jitlab.errors") for b in sorted(graph[a])]
    assert not bad, "\n".join(bad)


def test_the_check_sees_function_level_cycles():
    """The checker itself: a cycle that exists only through an import inside a function is found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert find_cycles(graph) == [["a", "b"]]
    src = "def f():\n    from jitlab.x import y\n"
    assert any(isinstance(n, ast.ImportFrom) and n.module == "jitlab.x" for n in ast.walk(ast.parse(src)))



def _is_jitlab_import(node) -> bool:
    """An ``import jitlab...``, a ``from jitlab... import`` or a relative import (inside the package, one of jitlab's)."""
    if isinstance(node, ast.Import):
        return any(a.name == "jitlab" or a.name.startswith("jitlab.") for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] == "jitlab")


def inline_imports(root: Path = ROOT) -> dict[str, list[str]]:
    """``file -> ["line: import", ...]``: the jitlab imports inside functions (seed_bank/ is generated: not counted)."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("seed_bank/"):
            continue
        found = {n.lineno: f"{n.lineno}: {ast.unparse(n)}" for fn in ast.walk(ast.parse(path.read_text(), str(path)))
                 if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(fn) if _is_jitlab_import(n)}
        if found:
            out[rel] = [found[k] for k in sorted(found)]
    return out


def test_in_function_jitlab_imports_only_where_allowed():
    """A jitlab import goes at the top of its file unless INLINE names the file and why (a cycle, the start-up cost
    of a heavy dependency or of ``jitlab --help``, the sandbox child's order); an entry no longer needed goes."""
    found = inline_imports()
    bad = [f"{f}:{line}" for f, lines in found.items() if f not in INLINE for line in lines]
    assert not bad, "jitlab imports inside functions (move them to the top of the file, or add the file to " \
                    "INLINE in tests/test_layers.py with the reason):\n" + "\n".join(bad)
    stale = sorted(set(INLINE) - set(found))
    assert not stale, f"INLINE entries whose file has no jitlab import inside a function (remove them): {stale}"


def test_the_inline_check_sees_imports_in_methods_and_nested_functions(tmp_path):
    """The checker itself: imports inside a method, a nested function and a relative one are found; a top-level
    one, a third-party one and a name that only starts with "jitlab" are not."""
    (tmp_path / "a.py").write_text("from jitlab.store import load\n\n\nclass A:\n    def f(self):\n"
                                   "        from jitlab.store import load\n        import torch\n"
                                   "        import jitlabx\n\n        def g():\n            from . import x\n")
    (tmp_path / "b.py").write_text("import jitlab\n")
    assert inline_imports(tmp_path) == {"a.py": ["6: from jitlab.store import load", "11: from . import x"]}
