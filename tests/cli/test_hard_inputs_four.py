"""Issue 45 (hard inputs, round four): exports that would delete their run or what a user put in ``--out``, locks
that follow symbolic links, YAML aliases in harness files, user suites, training splits, comparisons with nothing
to pair, damaged records, and refusals that came after work was done. Each test's docstring holds the command it
reproduces and what happened before."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO, RUN, one_line_error

from jitlab.cli import main
from jitlab.sandbox import probe


@pytest.fixture
def finished_run(tmp_path, capsys):
    out = tmp_path / "runs" / "demo"
    assert main([*RUN, "--limit", "2", "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- item 1: an export onto the run itself ---------------------------------------------------------------------
@pytest.mark.parametrize("case", ["out-is-parent", "dot-from-inside", "folder-onto-itself", "holds-the-run"])
def test_an_export_onto_its_own_run_is_refused_before_anything_is_written(case, finished_run, capsys, monkeypatch):
    """jitlab export runs/demo --out runs; cd runs/demo && jitlab export . --out ..; jitlab export runs --out runs;
    jitlab export runs/demo/inner --out runs/demo (OUT/inner... here OUT/<name> holds the run): before, run.sqlite
    (every step, prompt and completion) was replaced by the export, exit 0."""
    runs = finished_run.parent
    if case == "holds-the-run":   # a run at demo/demo: its export as ./demo would hold it
        inner = finished_run / "demo"
        assert main([*RUN, "--limit", "1", "--quiet", "--out", str(inner)]) == 0
        capsys.readouterr()
        monkeypatch.chdir(finished_run)
        argv = ["export", "demo", "--out", "."]
    elif case == "dot-from-inside":
        monkeypatch.chdir(finished_run)
        argv = ["export", ".", "--out", ".."]
    else:
        argv = ["export", str(finished_run if case == "out-is-parent" else runs), "--out", str(runs)]
    before = _tree(runs)
    one_line_error(capsys, argv, "cannot export", "itself", "pass an --out folder outside it")
    assert _tree(runs) == before


# -- item 2: an export replaces only an export -----------------------------------------------------------------
def test_an_export_replaces_only_a_folder_export_wrote(finished_run, tmp_path, capsys):
    """mkdir -p res/demo && echo notes > res/demo/notes.txt; jitlab export runs/demo --out res: before, notes.txt
    was deleted (the folder replaced by the export), exit 0. An earlier export there is still replaced; one with a
    file added to it is not."""
    res = tmp_path / "res"
    (res / "demo").mkdir(parents=True)
    (res / "demo" / "notes.txt").write_text("my notes")
    one_line_error(capsys, ["export", str(finished_run), "--out", str(res)], f"{res / 'demo'}",
                   "is not an export jitlab wrote", "move it away or pass another --out")
    assert (res / "demo" / "notes.txt").read_text() == "my notes"
    (res / "demo" / "notes.txt").unlink()
    assert main(["export", str(finished_run), "--out", str(res)]) == 0      # an empty folder: nothing to lose
    assert main(["export", str(finished_run), "--out", str(res)]) == 0      # its own export: replaced
    assert sorted(p.name for p in (res / "demo").iterdir()) == ["calls.csv", "card.json", "episodes.csv", "run.json",
                                                               "steps.csv", "summary.json"]
    (res / "demo" / "plot.png").write_bytes(b"png")
    capsys.readouterr()
    one_line_error(capsys, ["export", str(finished_run), "--out", str(res)], "is not an export jitlab wrote")
    assert (res / "demo" / "plot.png").read_bytes() == b"png"
    assert [p.name for p in res.iterdir()] == ["demo"], "no temporary folder is left beside it"


# -- item 7: a summary.json that contradicts the records -------------------------------------------------------
def test_export_takes_the_summary_from_the_records_and_names_a_contradicting_file(finished_run, tmp_path):
    """python -c '...summary["success_rate"] = 0.99...' on runs/demo/summary.json; jitlab export runs/demo --out
    res: before, the export carried 0.99 over records of 0.00, no word."""
    path = finished_run / "summary.json"
    edited = {**json.loads(path.read_text()), "success_rate": 0.99, "note": "kept: a key the records do not compute"}
    path.write_text(json.dumps(edited))
    with pytest.warns(UserWarning, match=r"disagrees with the run's records on success_rate \(success_rate 0.99 vs 0.0\)"):
        assert main(["export", str(finished_run), "--out", str(tmp_path / "res")]) == 0
    exported = json.loads((tmp_path / "res" / "demo" / "summary.json").read_text())
    assert exported["success_rate"] == 0.0 and exported["n_success"] == 0 and exported["note"] == edited["note"]
    assert json.loads(path.read_text()) == edited                     # the run's own file is left as it was


# -- item 13 (summary.json): valid JSON, but not a mapping -----------------------------------------------------
def test_export_recomputes_a_summary_that_is_not_a_mapping(finished_run, tmp_path):
    """echo '[1, 2]' > runs/demo/summary.json; jitlab export runs/demo --out res: before, TypeError: 'list' object
    is not a mapping."""
    (finished_run / "summary.json").write_text("[1, 2]")
    with pytest.warns(UserWarning, match="is not a JSON mapping"):
        assert main(["export", str(finished_run), "--out", str(tmp_path / "res")]) == 0
    assert json.loads((tmp_path / "res" / "demo" / "summary.json").read_text())["n_episodes"] == 2


# -- item 20: an export onto a full disk -----------------------------------------------------------------------
def test_an_export_onto_a_full_disk_leaves_nothing_behind(tmp_path, capsys):
    """jitlab export runs/demo --out <a 24k tmpfs>/res: before, "a file under small/res: No space left on device"
    and small/res/demo.export-tmp left behind. An earlier export there stays whole."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        one = tmp_path / "runs" / "one"
        assert main([*RUN, "--limit", "1", "--quiet", "--out", str(one)]) == 0
        assert main(["export", str(one), "--out", str(small / "res")]) == 0         # fits
        old = _tree(small / "res")
        big = tmp_path / "big" / "one"     # the same name, too big for what is left
        assert main([*RUN, "--limit", "8", "--quiet", "--out", str(big)]) == 0
        capsys.readouterr()
        one_line_error(capsys, ["export", str(big), "--out", str(small / "res")], "No space left on device",
                       "nothing half-written is left", "free space")
        assert os.listdir(small / "res") == ["one"] and _tree(small / "res") == old
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


# -- item 3: lock files that are symbolic links ----------------------------------------------------------------
JIT = ["jit", "--suite", "toy", "--mode", "streaming", "--backbone", "scripted:pick-hash", "--retrieval", "bm25",
       "--no-cache", "--quiet", "--limit", "1"]


@pytest.mark.parametrize("lock", ["run.lock", "bank.sqlite.lock"])
def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_kept(lock, tmp_path, capsys):
    """ln -s victim.txt runs/l/run.lock (or j/bank.sqlite.lock); jitlab run|jit ... --out runs/l: before, the run
    went ahead and victim.txt was truncated and overwritten with the PID."""
    victim, out = tmp_path / "victim.txt", tmp_path / "l"
    victim.write_text("precious")
    out.mkdir()
    (out / lock).symlink_to(victim)
    one_line_error(capsys, [*(RUN if lock == "run.lock" else JIT), "--limit", "1", "--out", str(out)],
                   f"lock file {out / lock} is a symbolic link", "remove the link and rerun")
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in out.iterdir()) == [lock], "nothing written before the refusal"


def test_a_batch_lock_that_is_a_link_or_not_a_file_is_refused(tmp_path, monkeypatch):
    """ln -s victim.txt bo/batch.lock; jitlab batch notebooks/00_quickstart.ipynb --grid g.yaml --out bo: before,
    victim.txt was overwritten with the PID (and the batch ran); a FIFO or a folder as the lock is refused too."""

    import jitlab.batch as batch
    from jitlab.errors import StorageError
    monkeypatch.setattr(batch, "_run_locked", lambda *a, **k: {"summary": {}})   # no notebook is run here
    victim, out = tmp_path / "victim.txt", tmp_path / "bo"
    victim.write_text("precious")
    out.mkdir()
    cfg = batch.BatchConfig(notebook=str(REPO / "notebooks" / "00_quickstart.ipynb"), grid="", out=str(out))
    (out / "batch.lock").symlink_to(victim)
    with pytest.raises(StorageError, match="is a symbolic link"):
        batch.run_batch(cfg, combos=[{"limit": 1}])
    assert victim.read_text() == "precious"
    (out / "batch.lock").unlink()
    os.mkfifo(out / "batch.lock")
    with pytest.raises(StorageError, match="is not a regular file"):
        batch.run_batch(cfg, combos=[{"limit": 1}])
    (out / "batch.lock").unlink()
    (out / "batch.lock").mkdir()
    with pytest.raises(StorageError, match="is a directory"):
        batch.run_batch(cfg, combos=[{"limit": 1}])
    (out / "batch.lock").rmdir()
    assert batch.run_batch(cfg, combos=[{"limit": 1}]) == {"summary": {}}     # a plain lock file works as before


# -- item 4: a YAML alias bomb in a harness's description.yaml ---------------------------------------------------
def _bomb(levels: int) -> str:
    """``levels`` of nine aliases each: 9**levels leaves from a few hundred bytes (4 levels here: small enough that
    main expands it in the test without running out of memory)."""
    lines = ["name: bomb", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join([*lines, f"modules: {{M: *l{levels - 1}, P: p, F: f, A: a}}", ""])


def test_yaml_aliases_in_harness_files_are_refused_not_expanded():
    """The parent's readers of description.yaml (retrieval's describe_files, the bank, the harness card) and the
    harness loader: before, aliases were resolved, and the card's str() of a 342-byte bomb grew until memory ran
    out. The same YAML without aliases still loads."""
    from jitlab.errors import HarnessError
    from jitlab.harness import _load_yaml
    from jitlab.jit.generate.base import describe_files
    bomb = _bomb(4)
    assert describe_files({"description.yaml": bomb}) == {}
    with pytest.raises(HarnessError, match="line 3, column .*the alias \\*l0: YAML aliases are not allowed"):
        _load_yaml({"prompt.yaml": "a: &x hi\nb: *x\n"} | {"description.yaml": bomb}, "description.yaml")
    with pytest.raises(HarnessError, match="aliases are not allowed"):
        _load_yaml({"prompt.yaml": "system: &x hi\nuser: *x\n"}, "prompt.yaml")
    assert describe_files({"description.yaml": "name: x\nmodules: &m {M: a}\n"})["modules"] == {"M": "a"}


@pytest.mark.skipif(not probe()[0], reason="bubblewrap sandbox unavailable")
def test_an_alias_bomb_harness_fails_its_episode_and_its_export_card_says_unknown(tmp_path, capsys):
    """jitlab harnesses export react --out hb; <bomb> > hb/description.yaml; jitlab run --harness hb ...; jitlab
    export runs/b --out res: before, the run went ahead and export's card expanded the bomb (MemoryError at 4 GB
    after ~50 s under a cap; unbounded without)."""
    from jitlab.store import load
    folder, out = tmp_path / "hb", tmp_path / "runs" / "b"
    assert main(["harnesses", "export", "react", "--out", str(folder)]) == 0
    (folder / "description.yaml").write_text(_bomb(4))
    assert main([*RUN[:3], "--harness", str(folder), *RUN[5:], "--limit", "1", "--quiet", "--out", str(out)]) == 0
    episode = load(out)["episodes"].iloc[0]
    assert episode["status"] == "harness_error" and "YAML aliases are not allowed" in episode["error"]
    assert main(["export", str(out), "--out", str(tmp_path / "res")]) == 0
    card = json.loads((tmp_path / "res" / "b" / "card.json").read_text())
    assert card["modules"] is None and "description.yaml does not parse" in card["modules_from"]


# -- items 5, 9, 12: user suites by dotted path ------------------------------------------------------------------
USER_SUITES = '''"""Hostile user suites (TEST DOUBLES of the toy suite) for issue 45."""
import dataclasses

from jitlab.envs.toy import ToyEnv, ToySuite


class Dup(ToySuite):
    def tasks(self, split="dev", family=None):
        tasks = super().tasks(split, family)[:3]
        return [*tasks, tasks[0]]


class ZeroSteps(ToySuite):
    def tasks(self, split="dev", family=None):
        return [dataclasses.replace(t, max_steps=-1 if i else 0) for i, t in enumerate(super().tasks(split, family))]


class Raises(ToySuite):
    def __init__(self):
        raise RuntimeError("boom in __init__")


class NoneTasks(ToySuite):
    def tasks(self, split="dev", family=None):
        return None


class NotSpecs(ToySuite):
    def tasks(self, split="dev", family=None):
        return ["toy-dev-0", "toy-dev-1"]


class NotASuite:
    pass


class BadEnv(ToySuite):
    def make_env(self, spec):
        if spec.id == "toy-dev-1":
            raise RuntimeError("make_env boom")
        return ToyEnv(spec)
'''


@pytest.fixture
def user_suites(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.getbasetemp() / "h45_suites"
    folder.mkdir(exist_ok=True)
    (folder / "h45_suites.py").write_text(USER_SUITES)
    monkeypatch.syspath_prepend(str(folder))
    return "h45_suites"


@pytest.mark.parametrize("command", ["run", "jit"])
@pytest.mark.parametrize("suite, needle", [
    ("Dup", "duplicate task ids 'toy-dev-0' (2x)"),                                  # item 5
    ("ZeroSteps", "max_steps must be an integer >= 1, got toy-dev-0 (0), toy-dev-1 (-1)"),   # item 9
    ("Raises", "Raises() raised RuntimeError: boom in __init__"),                    # item 12
    ("NoneTasks", "tasks() returned NoneType, not a list of TaskSpec"),
    ("NotSpecs", "tasks() returned item 0 (str), item 1 (str), not TaskSpec"),
    ("NotASuite", "not a suite (no tasks or make_env method)"),
    ("Missing", "module h45_suites has no 'Missing'"),
])
def test_a_bad_user_suite_is_one_line_before_anything_is_written(command, suite, needle, user_suites, tmp_path, capsys):
    """jitlab run|jit --suite h45_suites:<Suite> ...: before, Dup ran 3 of its 4 tasks (the repeated id skipped as
    done), ZeroSteps recorded 0-step episodes as ok, exit 0; the others ended in a traceback (TypeError,
    AttributeError, RuntimeError), NotSpecs leaving a run.sqlite."""
    out = tmp_path / "u"
    argv = [*RUN, "--limit", "4"] if command == "run" else JIT
    argv = [a if a != "toy" else f"{user_suites}:{suite}" for a in argv]
    one_line_error(capsys, [*argv, "--out", str(out)], needle)
    assert not out.exists()


def test_a_user_suite_that_cannot_be_imported_is_one_line(tmp_path, capsys):
    """jitlab run --suite nosuchmodule:Suite ...: before, ModuleNotFoundError traceback."""
    one_line_error(capsys, [*RUN[:2], "nosuchmodule_h45:Suite", *RUN[3:], "--out", str(tmp_path / "u")],
                   "no module 'nosuchmodule_h45' to import", "PYTHONPATH")


def test_a_make_env_that_raises_fails_that_episode_and_the_run_goes_on(user_suites, tmp_path, capsys):
    """jitlab run --suite h45_suites:BadEnv --limit 3 ...: before, the RuntimeError stopped the whole run (a
    traceback) and left toy-dev-1 stuck as `running`."""
    from jitlab.store import load
    out = tmp_path / "u"
    argv = [a if a != "toy" else f"{user_suites}:BadEnv" for a in RUN]
    assert main([*argv, "--limit", "3", "--quiet", "--out", str(out)]) == 1       # a task left unfinished
    err = capsys.readouterr().err
    assert "Traceback" not in err and "make_env(toy-dev-1) failed: RuntimeError: make_env boom" in err
    eps = load(out)["episodes"]
    assert set(eps.loc[eps["task_id"] == "toy-dev-1", "status"]) == {"infra_error"}
    assert sorted(eps.loc[eps["final"], "task_id"]) == ["toy-dev-0", "toy-dev-2"]


# -- items 6 and 14 (baseline_options): the pipeline's evidence and evaluation splits -----------------------------
PIPELINE = "suite: toy\nexecutor: scripted:pick-first\nseeds: [react]\nbaseline_limit: 1\neval_limit: 1\n"


@pytest.mark.parametrize("extra, needle", [
    ("baseline_split: dev\neval_split: dev\n", "eval_split dev is also where the policies' evidence comes from "
                                               "(baseline_split dev, data1 splits dev, stage3 split dev)"),
    ("baseline_split: dev\neval_split: dev\ndata1: {splits: [train]}\nstage3: {split: train}\n", "(baseline_split dev)"),
    ("baseline_split: train\neval_split: dev\nstage3: {split: train}\n", "(data1 splits dev)"),
    ("baseline_options: {split: test}\n", "baseline_options: split is set by the pipeline (baseline_split)"),
    ("eval_options: {limit: 3}\n", "eval_options: limit is set by the pipeline (eval_limit, eval_limits)"),
])
def test_a_pipeline_that_would_evaluate_on_its_evidence_or_set_a_split_twice_is_refused(extra, needle, tmp_path,
                                                                                      capsys):
    """jitlab train pipeline --config c.yaml (baseline_split: dev, eval_split: dev) --out p: before, accepted (the
    evaluation ran on the tasks the evidence came from); baseline_options: {split: test}: TypeError: run_grid() got
    multiple values for keyword argument 'split', after pipeline.json was written."""
    config = tmp_path / "c.yaml"
    config.write_text(PIPELINE + extra)
    one_line_error(capsys, ["train", "pipeline", "--config", str(config), "--out", str(tmp_path / "p"), "--steps",
                            "baselines"], needle)
    assert not (tmp_path / "p").exists()


def test_evaluating_on_dev_is_accepted_when_every_evidence_split_is_train(tmp_path):
    from jitlab.train.pipeline import PipelineConfig, evidence_splits
    cfg = PipelineConfig(suite="toy", executor="scripted:pick-first", eval_split="dev", data1={"splits": ["train"]},
                         stage3={"split": "train"})
    assert evidence_splits(cfg) == {"baseline_split": ["train"], "data1 splits": ["train"], "stage3 split": ["train"]}


# -- item 10: hooks.py ---------------------------------------------------------------------------------------------
def test_a_bad_pre_action_is_blamed_on_hooks_py_and_a_hooks_folder_is_refused(tmp_path, capsys):
    """hooks.py whose pre_action returns "go east"; jitlab run --harness hh ...: before, the episode's error and
    diagnostic named action.py ("Action.act returned str"). mkdir hh/hooks.py: before, ignored (the run went ahead
    without hooks)."""
    from jitlab.store import load
    folder = tmp_path / "hh"
    assert main(["harnesses", "export", "react", "--out", str(folder)]) == 0
    (folder / "hooks.py").write_text("class Hooks:\n    def pre_action(self, ctx, context, decision):\n"
                                     "        return 'go east'\n")
    argv = [*RUN[:3], "--harness", str(folder), *RUN[5:], "--isolation", "none", "--allow-unisolated", "--limit", "1",
            "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "r1")]) == 0
    episode = load(tmp_path / "r1")["episodes"].iloc[0]
    assert episode["status"] == "harness_error"
    assert "Hooks.pre_action returned str, expected a Decision or None" in episode["error"]
    assert json.loads(episode["diagnostic"])["file"] == "hooks.py"
    (folder / "hooks.py").unlink()
    (folder / "hooks.py").mkdir()
    capsys.readouterr()
    one_line_error(capsys, [*argv, "--out", str(tmp_path / "r2")], f"{folder / 'hooks.py'} is a directory, not a file")
    assert not (tmp_path / "r2").exists()


# -- item 13: damaged card.json, batch manifest.json, compliance records --------------------------------------------
@pytest.mark.parametrize("text", ["{not json", "", "[1, 2]", '{"harness": "react", "budgets": "none", "decoding": 3}'])
def test_a_damaged_card_is_recomputed_from_the_records_with_a_warning(text, finished_run, tmp_path, capsys):
    """printf '[1, 2]' > res/demo/card.json (corrupt, empty, a list, wrong types); jitlab figures --runs res: before,
    JSONDecodeError / TypeError / KeyError after the figures were drawn."""
    res = tmp_path / "res"
    assert main(["export", str(finished_run), "--out", str(res)]) == 0
    (res / "demo" / "card.json").write_text(text)
    with pytest.warns(UserWarning, match="card.json is damaged"):
        assert main(["figures", "--runs", str(res), "--out", str(tmp_path / "figs")]) == 0
    assert "budgets: max_steps each task's own" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"runs": [3]}', '{"runs": [{"status": "ok"}]}'])
def test_a_damaged_batch_manifest_is_one_line_and_kept(text, tmp_path, capsys):
    """printf '[1, 2]' > bo/manifest.json; jitlab batch notebooks/00_quickstart.ipynb --grid g.yaml --out bo: before,
    JSONDecodeError / AttributeError / TypeError traceback."""
    grid, out = tmp_path / "g.yaml", tmp_path / "bo"
    grid.write_text("limit: [1]\n")
    out.mkdir()
    (out / "manifest.json").write_text(text)
    one_line_error(capsys, ["batch", str(REPO / "notebooks" / "00_quickstart.ipynb"), "--grid", str(grid), "--out",
                            str(out)], f"{out / 'manifest.json'} is damaged", "move it away")
    assert (out / "manifest.json").read_text() == text


def test_damaged_compliance_records_are_left_out_with_one_warning(finished_run, tmp_path, capsys):
    """UPDATE steps SET compliance='{broken' WHERE step=2 in runs/demo/run.sqlite; jitlab show runs/demo
    --compliance | jitlab export runs/demo: before, json.decoder.JSONDecodeError traceback."""
    import sqlite3
    import warnings
    db = sqlite3.connect(finished_run / "run.sqlite")
    db.execute("UPDATE steps SET compliance='{broken' WHERE step=2")
    db.execute("UPDATE steps SET compliance='[1]' WHERE step=3")
    db.commit()
    db.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["show", str(finished_run), "--compliance"]) == 0
    said = [str(w.message) for w in caught if "compliance record" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("4 step compliance record(s) are not JSON mappings"), said
    out = capsys.readouterr().out
    assert f"compliance in {finished_run} (12 steps)" in out
    assert main(["export", str(finished_run), "--out", str(tmp_path / "res")]) == 0


# -- items 14 (seed) and 16 (the JIT's seed): a seed range past the largest seed --------------------------------------
@pytest.mark.parametrize("command", ["run", "jit"])
def test_a_repeat_past_the_largest_seed_is_refused_before_any_repeat_runs(command, tmp_path, capsys):
    """jitlab run|jit ... --seed 9223372036854775807 --repeat 2 --backbone-option temperature=0.7: before, run's
    OverflowError (Python int too large to convert to SQLite INTEGER) left a run directory; jit refused only after
    its first repeat had run (seed9223372036854775807/ left)."""
    out = tmp_path / "o"
    argv = [*(RUN if command == "run" else JIT), "--limit", "1", "--seed", str(2 ** 63 - 1), "--repeat", "2",
            "--backbone-option", "temperature=0.7", "--out", str(out)]
    one_line_error(capsys, argv, f"plays seeds up to {2 ** 63}, past the largest seed {2 ** 63 - 1}",
                   f"lower --seed to at most {2 ** 63 - 2}")
    assert not out.exists()


# -- item 15: output piped into a reader that stops early ------------------------------------------------------------
def _reader_gone(argv, cwd) -> tuple[int, str]:
    """``jitlab ARGV | head -0``: jitlab's standard output is a pipe whose reader has already exited, so its first
    write fails as it would after ``head -1`` read its line. Returns jitlab's exit code and stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "jitlab.cli", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=cwd, timeout=120)
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("command", ["show", "suites", "compare"])
def test_a_read_command_piped_into_head_ends_quietly(command, finished_run, tmp_path):
    """jitlab show runs/demo | head (jitlab suites | head, jitlab compare ... | head): before, "jitlab: error: a file
    jitlab read or wrote: Broken pipe", exit 2."""
    argv = {"show": ["show", str(finished_run)], "suites": ["suites"],
            "compare": ["compare", str(finished_run), str(finished_run)]}[command]
    assert _reader_gone(argv, tmp_path) == (0, "")


def test_a_run_whose_reader_has_gone_says_it_stopped(tmp_path):
    """jitlab run ... | head -0 (the run prints its progress): it stops with one line, exit 141 (as a writer stopped
    by its pipe), and the rerun resumes."""
    out = tmp_path / "r"
    rc, err = _reader_gone([*RUN, "--limit", "2", "--out", str(out)], tmp_path)
    assert rc == 141 and err.strip().splitlines() == ["jitlab: stopped: the program reading its output exited (broken "
                                                      "pipe); what finished is recorded: rerun the same command to resume"]
    assert main([*RUN, "--limit", "2", "--quiet", "--out", str(out)]) == 0


# -- item 17: the config-change message names the value a left-out field stands for --------------------------------
def test_a_config_change_names_the_value_of_a_field_a_fingerprint_leaves_out(tmp_path, capsys):
    """jitlab jit ... --out j, then the same with --bank-rule paired / --option-evidence references: before, the
    refusal said "bank_rule: None -> 'paired'" and "option_evidence: 'bank' -> None" (the fingerprint leaves out a
    field at the value runs had before it existed). jitlab run --offset likewise."""
    out = tmp_path / "j"
    assert main([*JIT, "--out", str(out)]) == 0
    capsys.readouterr()
    err = one_line_error(capsys, [*JIT, "--bank-rule", "paired", "--out", str(out)], "bank_rule: 'dominance' -> 'paired'")
    assert "None" not in err
    err = one_line_error(capsys, [*JIT, "--option-evidence", "references", "--out", str(out)],
                         "option_evidence: 'bank' -> 'references'")
    assert "None" not in err
    assert main([*RUN, "--limit", "1", "--offset", "1", "--quiet", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    one_line_error(capsys, [*RUN, "--limit", "1", "--out", str(tmp_path / "r")], "offset: 1 -> 0")


# -- item 18: jitlab show of a jit --repeat folder ---------------------------------------------------------------------
def test_show_reads_a_jit_repeat_folder(tmp_path, capsys):
    """jitlab jit ... --repeat 2 --backbone-option temperature=0.7 --out jr; jitlab show jr: before, "jr holds no
    run.sqlite; is it a jitlab run directory?" (the README says show reports repeats)."""
    out = tmp_path / "jr"
    assert main([*JIT[:-1], "2", "--repeat", "2", "--backbone-option", "temperature=0.7", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"{out / 'seed0'}" in shown and f"{out / 'seed1'}" in shown
    assert f"repeats in {out}: k=2 (seeds 0..1, varies: sampling) over 2 tasks" in shown


# -- item 19: a read-only $JITLAB_HOME ----------------------------------------------------------------------------------
def test_a_read_only_jitlab_home_turns_the_cache_off_with_one_warning(tmp_path, monkeypatch, capsys):
    """mount -t tmpfs -o ro tmpfs ro; JITLAB_HOME=ro/jitlab jitlab run --suite toy ... (the replay cache on): before,
    "jitlab: error: ro/jitlab: Read-only file system", the run stopped before its first episode."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        monkeypatch.setenv("JITLAB_HOME", str(ro / "jitlab"))
        argv = [a for a in RUN if a != "--no-cache"]
        with pytest.warns(UserWarning, match="replay cache .* failed .*Read-only file system.*continuing without the "
                                             "cache") as said:
            assert main([*argv, "--limit", "2", "--quiet", "--out", str(tmp_path / "r")]) == 0
        assert len([w for w in said if "replay cache" in str(w.message)]) == 1
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


# -- item 16: the engineer's later batches are checked before its first run ----------------------------------------------
@pytest.mark.parametrize("flags, needle", [
    (["--batch", "5", "--selection", "confirm", "--disjoint"], "no dev tasks 10..14 for the confirm batch"),
    (["--batch", "4", "--offset", "6", "--disjoint"], "no dev tasks 10..13 for the disjoint batch"),
])
def test_an_engineer_batch_past_the_end_of_the_split_is_refused_before_any_run(flags, needle, tmp_path, capsys):
    """jitlab engineer run --suite toy ... --batch 5 --selection confirm --disjoint: before, refused with "no dev
    tasks 10..14" only after the batch, the candidates and their validation had run (8-11 s; round0/, patches/,
    candidates.jsonl left in --out)."""
    out = tmp_path / "e"
    one_line_error(capsys, ["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first",
                            "--engineer", "rules", "-k", "2", *flags, "--out", str(out)], needle)
    assert not out.exists()
