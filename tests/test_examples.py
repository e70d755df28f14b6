"""examples/: the newcomer's first read runs, and uses only the protocol (no module library)."""
import ast
import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hello_harness_runs_on_the_toy_suite(capsys):
    results = _load("hello_harness").main(["--limit", "2"])
    assert len(results) == 2 and all(r.status == "ok" and r.steps >= 1 for r in results)
    assert "toy-dev-0: ok" in capsys.readouterr().out


def test_hello_harness_is_written_from_scratch():
    tree = ast.parse((EXAMPLES / "hello_harness.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "jitlab.protocol" in modules and not any(m.startswith("jitlab.modules") for m in modules)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert classes == {"Memory", "Planner", "CapabilityPolicy", "Action"}
    assert all(not n.bases for n in tree.body if isinstance(n, ast.ClassDef))     # nothing inherited
