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
jitlab.protocol and jitlab.harnesskit, and protocol.py and errors.py import no jitlab module.
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
# what viz must not import: the modules that start runs (viz reads their records back)
RUNS_STARTERS = {"jitlab.runner", "jitlab.jit.inference", "jitlab.jit.loop", "jitlab.jit.worker", "jitlab.cluster",
                 "jitlab.experiments", "jitlab.batch"}


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
