"""Resolved harness source and honest identity: a library edit changes exactly the shas of the seeds using it."""
import ast
import importlib.util
import shutil
from pathlib import Path

import pytest

import jitlab.resolve as R
from jitlab.errors import ConfigDrift
from jitlab.harness import (
    case_study_names,
    harness_sha,
    read_files,
    regenerate_seeds,
    seed_bank_dir,
    seed_names,
    seed_sources_dir,
    small_model_names,
)
from jitlab.resolve import ResolveError, resolve_file, resolve_files


def _library(module: str) -> str:
    return Path(importlib.util.find_spec(module).origin).read_text()


def _edited_memory() -> dict:
    """jitlab.modules.memory with one method of PeriodicSummaryMemory changed (resum and oagent use it)."""
    text = _library("jitlab.modules.memory")
    old = "self.verified = (self.verified + verified)[-6:]"
    assert text.count(old) == 1
    return {"jitlab.modules.memory": text.replace(old, "self.verified = (self.verified + verified)[-7:]")}


def _users_of(cls_name: str) -> set[str]:
    return {n for n in seed_names() if any(f"# library: jitlab.modules.memory.{cls_name}\n" in t
                                           for t in read_files(seed_bank_dir() / n).values())}


def test_a_library_edit_changes_exactly_the_shas_of_the_seeds_that_use_it(tmp_path):
    edited = _edited_memory()
    users = _users_of("PeriodicSummaryMemory")
    assert users == {"resum", "oagent"}
    # before regeneration the checked-in seeds are out of date for exactly those seeds
    assert set(regenerate_seeds(check=True, sources=edited)) == users
    before = {n: harness_sha(read_files(seed_bank_dir() / n)) for n in seed_names()}
    fresh = set(regenerate_seeds(out_dir=tmp_path, sources=edited))                       # a fresh folder
    assert fresh == set(seed_names()) | set(case_study_names()) | set(small_model_names())
    after = {n: harness_sha(read_files(tmp_path / n)) for n in seed_names()}
    assert {n for n in before if before[n] != after[n]} == users
    # the library-composed source hashes to the same identity as its regenerated form
    assert harness_sha(read_files(seed_sources_dir() / "resum"), sources=edited) == after["resum"]


def test_resumed_run_says_the_harness_changed_after_a_library_edit(tmp_path, monkeypatch):
    from jitlab.runner import RunConfig, run
    folder = tmp_path / "thin_resum"
    shutil.copytree(seed_sources_dir() / "resum", folder)          # subclasses jitlab.modules
    cfg = dict(suite="toy", harness=str(folder), backbone="scripted:pick-first", limit=1, out=str(tmp_path / "run"),
               isolation="none", allow_unisolated=True, cache=False)
    run(RunConfig(**cfg))
    edited = _edited_memory()
    real = R._library_source
    monkeypatch.setattr(R, "_library_source", lambda module, sources: edited.get(module) or real(module, sources))
    R._resolve_cached.cache_clear()
    try:
        with pytest.raises(ConfigDrift, match="harness_sha"):
            run(RunConfig(**cfg))
    finally:
        R._resolve_cached.cache_clear()


def test_resolved_files_are_self_contained_and_runnable():
    files = resolve_files(read_files(seed_sources_dir() / "deepagent"))
    for name in ("memory.py", "planning.py", "tool_policy.py", "action.py"):
        tree = ast.parse(files[name])
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not any(m.startswith("jitlab.modules") for m in modules), name
        compile(files[name], name, "exec")


def test_aliased_import_keeps_the_alias_and_inherits_the_inlined_class():
    text = ("from dataclasses import dataclass, field\n\nfrom jitlab.modules.memory import PeriodicSummaryMemory as _Base\n"
            "\n\n@dataclass\nclass Memory(_Base):\n    every_k: int = field(default=3)\n")
    out = resolve_file(text, "memory.py")
    assert "_Base = PeriodicSummaryMemory" in out and "class PeriodicSummaryMemory:" in out
    namespace = {}
    exec(compile(out, "memory.py", "exec"), namespace)
    assert namespace["Memory"]().every_k == 3 and namespace["Memory"].__mro__[1].__name__ == "PeriodicSummaryMemory"


def test_unresolvable_files_are_named_errors():
    with pytest.raises(ResolveError, match="syntax error"):
        resolve_file("from jitlab.modules.basic import FullHistory\nclass Memory(:\n", "memory.py")
    with pytest.raises(ResolveError, match="null bytes"):
        resolve_file("from jitlab.modules.basic import FullHistory\n\0", "memory.py")
    files = {**read_files(seed_sources_dir() / "react"), "memory.py": "x = 1\0\n"}
    assert len(harness_sha(files)) == 64                            # hashed as written; loading reports the file
    with pytest.raises(ResolveError, match="from jitlab.modules.<module> import"):
        resolve_file("import jitlab.modules.basic\n", "memory.py")
    with pytest.raises(ResolveError, match="history_text"):
        resolve_file("from jitlab.modules.basic import FullHistory\n\n\ndef history_text(e, n):\n    return ''\n",
                     "memory.py")
    with pytest.raises(ResolveError, match="render_prompt"):
        resolve_file("from jitlab.modules.prompting import render_file\n", "action.py")
    plain = "class Memory:\n    pass\n"
    assert resolve_file(plain) == plain                            # nothing to resolve: unchanged


def test_dashboard_diff_compares_resolved_sources(tmp_path):
    from jitlab.viz.dash.data import harness_diff
    thin = read_files(seed_sources_dir() / "resum")
    assert harness_diff(thin, seed_bank_dir() / "resum") == ""          # the same harness, written two ways
    diff = harness_diff(read_files(seed_sources_dir() / "oagent"), seed_bank_dir() / "resum")
    assert "class EnsembleVote" in diff and "+from jitlab.modules" not in diff


def test_cli_show_and_export_give_the_runnable_resolved_folder(tmp_path, capsys):
    from jitlab.cli import main
    from jitlab.harness import load_harness
    assert main(["harnesses", "show", "resum"]) == 0
    shown = capsys.readouterr().out
    assert "# ==== memory.py ====" in shown and "class PeriodicSummaryMemory" in shown
    assert not [line for line in shown.splitlines() if line.startswith(("from jitlab.modules", "import jitlab.modules"))]
    assert main(["harnesses", "export", str(seed_sources_dir() / "resum"), "--out", str(tmp_path / "r")]) == 0
    exported = load_harness(tmp_path / "r")
    assert exported.sha == load_harness("resum").sha and exported.files == read_files(seed_bank_dir() / "resum")
    assert main(["harnesses", "export", "resum", "--out", str(tmp_path / "r")]) == 2        # not empty: refused
    assert "not empty" in capsys.readouterr().err
    assert main(["harnesses", "regenerate", "--check"]) == 0


def test_thin_file_is_undone_by_resolving_it_for_every_seed_and_case_study_file():
    from jitlab.harness import case_study_names, read_files, seed_bank_dir, seed_names
    from jitlab.resolve import resolve_file, thin_file
    checked = 0
    for name in seed_names() + case_study_names():
        for file, text in read_files(seed_bank_dir() / name).items():
            if not file.endswith(".py") or "# library: " not in text:
                continue
            thin, _ = thin_file(text)
            assert "# library: " not in thin and len(thin) < len(text) and resolve_file(thin, file) == text, (name, file)
            checked += 1
    assert checked > 40
    text = read_files(seed_bank_dir() / "react")["action.py"]
    own = text.splitlines().index("class Action(ReActAction):") + 1
    thin, line = thin_file(text, own)
    assert thin.splitlines()[line - 1] == "class Action(ReActAction):" and thin_file(text, 20)[1] is None
