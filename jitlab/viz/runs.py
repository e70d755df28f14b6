"""Reading one run back in a notebook, and saving the figures a notebook draws. Running grids and JIT modes is
jitlab.experiments; nothing here starts a run.

    from jitlab.viz import runs as R
    rec = R.open_run("runs/quickstart")                        # episodes, steps, calls, config
    R.trajectory(rec, episode_id)                              # the steps of one episode
    R.backbone_calls(rec, episode_id)                          # every backbone call of it
    R.diagnostics(rec)                                         # status, error and diagnostic per episode
    R.harness_anatomies(rec)                                   # anatomy of each harness that ran
    R.jit_tasks(rec); R.harness_diff(rec, episode_id)          # JIT runs: per-task record, diff vs reference
    tasks, mech = R.mechanism_usage("runs/jit")                # case-study mechanisms chosen, success when chosen
    R.class_counts(tasks)                                      # tasks that carried each library class per slot
    R.save_figure(fig, "figures", stem, title, command)        # PNG/PDF/HTML + figures/README.md entry

Anatomy of a harness that is not a seed imports its code in this process, so :func:`harness_anatomies` skips those
unless ``trust_code=True``.
"""
from __future__ import annotations

import json
from pathlib import Path

from jitlab.errors import ConfigError, HarnessError
from jitlab.harness import read_files
from jitlab.jit.generate.library import SPACE, case_study_mechanisms, modules_of, option
from jitlab.jit.record import read_jit_record
from jitlab.store import Status, load, summarize
from jitlab.viz.anatomy import anatomy
from jitlab.viz.dash.data import harness_diff as _diff
from jitlab.viz.dash.data import harness_folder, is_seed, reference_files
from jitlab.viz.figures import register, save
from jitlab.viz.tables import markdown_table

__all__ = ["CLASS_COUNT_COLUMNS", "JIT_TASK_COLUMNS", "MECHANISM_COLUMNS", "MECHANISM_TASK_COLUMNS", "backbone_calls",
           "class_counts", "diagnostics", "harness_anatomies", "harness_diff", "jit_tasks", "mechanism_usage",
           "open_run", "register_figure", "save_figure", "trajectory"]


# -- reading one run -----------------------------------------------------------------------------
def open_run(run_dir: str | Path) -> dict:
    """:func:`jitlab.store.load` plus ``run_dir``, ``summary`` (summary.json, recomputed if missing)
    and ``finished`` (final episodes, ``extra`` read into a column ``jit_record`` of
    :class:`jitlab.jit.record.JITTaskRecord`)."""
    run_dir = Path(run_dir)
    rec = load(run_dir)
    path = run_dir / "summary.json"
    rec["summary"] = json.loads(path.read_text()) if path.exists() else summarize(run_dir)
    rec["run_dir"] = run_dir
    eps = rec["episodes"]
    rec["finished"] = eps[eps["final"]].assign(jit_record=[read_jit_record(x) for x in eps[eps["final"]]["extra"]])
    return rec


def _json(text, default):
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return default


def trajectory(rec: dict, episode_id: int | None = None):
    """The steps of one episode (default: the first finished one): step, tool, args, thought,
    observation, reward, done, tokens, and from the trace the directive and exposed capabilities. An export
    (results/) keeps no thoughts, observations or traces: those columns are empty."""
    episode_id = _episode(rec, episode_id)
    steps = rec["steps"][rec["steps"]["episode_id"] == episode_id].sort_values("step").copy()
    for col in ("thought", "observation", "trace"):
        if col not in steps:
            steps[col] = None
    traces = [_json(t, {}) for t in steps["trace"]]
    steps["directive"] = [t.get("directive") for t in traces]
    steps["capabilities"] = [t.get("capabilities") for t in traces]
    steps["args"] = [_json(a, a) for a in steps["args"]]
    cols = ["step", "tool", "args", "thought", "observation", "reward", "done", "tokens", "directive", "capabilities"]
    return steps[cols].reset_index(drop=True)


def backbone_calls(rec: dict, episode_id: int | None = None, full: bool = False):
    """Backbone calls of one episode (default: the first finished one); ``episode_id=-1`` for all.
    Without ``full`` the messages are reduced to their count and the reply to its first 200 chars."""
    calls = rec["calls"]
    if episode_id != -1:
        calls = calls[calls["episode_id"] == _episode(rec, episode_id)]
    calls = calls.copy()
    if not full and "messages" in calls:   # an export (results/) has per-call aggregates, no messages or replies
        calls["n_messages"] = [len(_json(m, [])) for m in calls["messages"]]
        calls["text"] = calls["text"].fillna("").str.slice(0, 200)
        calls = calls.drop(columns=["messages"])
    return calls.reset_index(drop=True)


def _episode(rec: dict, episode_id: int | None) -> int:
    finished = rec["finished"]
    if episode_id is None:
        if finished.empty:
            raise ConfigError(f"{rec['run_dir']} has no finished episode yet; pass an episode id from rec['episodes']")
        return int(finished["id"].iloc[0])
    if episode_id not in set(rec["episodes"]["id"]):
        raise ConfigError(f"episode {episode_id} is not in {rec['run_dir']}; ids: {sorted(rec['episodes']['id'])}")
    return int(episode_id)


def diagnostics(rec: dict, only_problems: bool = False):
    """One row per attempt: id, task_id, attempt, status, error, and the diagnostic's kind, file and
    message (parsed from JSON). ``only_problems``: attempts whose status is not ``ok``."""
    eps = rec["episodes"].copy()
    if only_problems:
        eps = eps[eps["status"] != Status.OK]
    diag = [_json(d, {}) for d in eps["diagnostic"]]
    for key in ("kind", "file", "message"):
        eps[f"diag_{key}"] = [d.get(key) if isinstance(d, dict) else None for d in diag]
    return eps[["id", "task_id", "attempt", "status", "success", "steps", "error", "diag_kind", "diag_file",
                "diag_message", "isolation"]].reset_index(drop=True)


JIT_TASK_COLUMNS = ["id", "task_id", "stream_index", "status", "success", "harness_name", "harness_generator",
                    "gen_tokens", "select_tokens", "repair_tokens", "exec_tokens", "repair_rounds", "valid_candidates",
                    "n_candidates", "fallback", "reference_names", "bank_size_before", "bank_size_after"]


def jit_tasks(rec: dict):
    """For a JIT run, one row per finished task from ``extra`` (docs/records.md): the harness chosen, tokens
    per phase, repair rounds, candidate validity, fallback, references and bank size. Empty for other runs."""
    import pandas as pd
    rows = [{"id": r["id"], "task_id": r["task_id"], "status": r["status"], "success": r["success"],
             **{k: getattr(r["jit_record"], k) for k in JIT_TASK_COLUMNS[5:] + ["stream_index"]}}
            for r in rec["finished"].to_dict("records") if r["jit_record"].mode]
    return pd.DataFrame(rows, columns=JIT_TASK_COLUMNS).sort_values("stream_index").reset_index(drop=True)


def harness_diff(rec: dict, episode_id: int | None = None) -> str:
    """Unified diff of the harness an episode ran against its nearest bank reference (JIT runs record
    ``extra.nearest_reference``); '' when there is none or the files are identical."""
    episode_id = _episode(rec, episode_id)
    row = rec["episodes"].set_index("id").loc[episode_id].to_dict()
    extra = read_jit_record(row.get("extra"))
    folder = harness_folder(rec["run_dir"], {**row, "harness_dir": extra.harness_dir,
                                             "episode_harness": row.get("harness")})
    reference = reference_files(rec["run_dir"], extra.nearest_reference)
    return _diff(folder, reference[1]) if folder is not None and reference is not None else ""


def harness_anatomies(rec: dict, trust_code: bool = False) -> dict:
    """``{label: Anatomy or reason}`` for each distinct harness that ran (by sha). Seed harnesses are
    analysed from seed_bank/; a generated harness (the run's ``harnesses/<sha>`` copy) only with
    ``trust_code`` (it imports the code here), else the value is a string saying why it was skipped."""
    out: dict = {}
    finished = rec["finished"]
    for sha, g in finished.groupby("harness_sha", sort=False):
        row = g.iloc[0].to_dict()
        record = row.pop("jit_record", None)
        if record is not None and record.harness_dir is not None:
            row["harness_dir"] = record.harness_dir
        row["episode_harness"] = row.get("harness")
        label = f"{row.get('harness')} ({str(sha)[:8]})"
        folder = harness_folder(rec["run_dir"], row)
        if folder is None:
            out[label] = "no harness files found for this sha (oracle or a run without saved harnesses)"
        elif not (trust_code or is_seed(folder)):
            out[label] = f"{folder}: generated code; pass trust_code=True to import and analyse it"
        else:
            out[label] = anatomy(folder)
    return out


MECHANISM_TASK_COLUMNS = ["id", "task_id", "stream_index", "harness_sha", "harness_name", "M", "P", "F", "A", "H",
                          "mechanisms", "case_studies", "modules_from", "success", "reward", "n_candidates",
                          "candidates_read"]
MECHANISM_COLUMNS = ["mechanism", "role", "case_studies", "tasks_chosen", "success_chosen", "reward_chosen",
                     "tasks_not_chosen", "success_not_chosen", "reward_not_chosen", "candidates_with", "candidates_read"]


def _harness_modules(run_dir: Path, sha, candidate: bool = False) -> tuple[dict | None, str]:
    """({role: module:Class}, where from) of a harness by sha from the files the run kept: a candidate's
    ``candidates/<sha16>/`` copy, ``harnesses/<sha>``, a seed, the run's bank; (None, "missing") otherwise."""
    if not isinstance(sha, str) or not sha:
        return None, "missing"
    if candidate:
        try:
            return modules_of(read_files(run_dir / "candidates" / sha[:16])), "files"
        except HarnessError:  # not written (a parse error) or gone: the harness copies below may still have it
            pass
    found = reference_files(run_dir, sha)
    return (modules_of(found[1]), "files") if found else (None, "missing")


def mechanism_usage(run):
    """Which case-study mechanisms (the options of ``jitlab.modules.case_studies``) the harnesses of a run used,
    and how their tasks went. ``run``: a run directory, an export (``results/...``) or :func:`open_run`'s record.
    Returns two DataFrames:

    - ``tasks`` (``MECHANISM_TASK_COLUMNS``), one row per finished task: the harness that ran (sha, name), the
      library class each role derives from (``M``/``P``/``F``/``A``, class names; ``H`` the hooks slot's, ``none``
      without a hooks.py, None for a record written before issue 29 had it), the case-study ``mechanisms``
      among them and their ``case_studies``, ``success``/``reward``, and for JIT tasks the candidates generated
      (``n_candidates``) and how many of them had readable modules (``candidates_read``);
    - ``mechanisms`` (``MECHANISM_COLUMNS``), one row per mechanism: tasks whose harness used it, success rate and
      mean reward on those and on the other tasks, and the candidates (chosen or not) that contained it.

    Where the classes come from (``modules_from``): the JIT record's ``modules`` (written since issue 15, so kept
    by exports too), else the files the run kept (``harnesses/<sha>``, ``candidates/<sha16>/``, a seed, the
    run's bank), else ``missing``: an export of a run recorded before ``modules`` existed keeps no harness
    files, so only seeds are found there. Tasks whose modules are missing count on neither side, and candidates
    whose modules are missing are not in ``candidates_read``. A class is read from the code (the role class's
    library base, :func:`jitlab.jit.generate.library.library_class`), so it is what ran, whatever generated it."""
    import pandas as pd

    rec = run if isinstance(run, dict) else open_run(run)
    run_dir = Path(rec["run_dir"])
    mechanisms = case_study_mechanisms()
    short = lambda path: path.split(":")[-1] if path else None  # noqa: E731
    rows, cand_rows = [], []
    for r in rec["finished"].sort_values("id").to_dict("records"):
        x = r["jit_record"]
        modules, source = (x.modules, "record") if x.modules else _harness_modules(run_dir, r["harness_sha"])
        read = 0
        for c in x.candidates:
            mods = c.get("modules") or _harness_modules(run_dir, c.get("sha"), candidate=True)[0]
            if mods:
                read += 1
                cand_rows.append(set(mods.values()))
        used = [p for p in (modules or {}).values() if p in mechanisms]
        rows.append({"id": r["id"], "task_id": r["task_id"], "stream_index": x.stream_index,
                     "harness_sha": r["harness_sha"], "harness_name": x.harness_name or r["harness"],
                     **{role: short((modules or {}).get(role)) for role in SPACE},
                     "mechanisms": [short(p) for p in used],
                     "case_studies": sorted({n.split("/")[-1] for p in used for n in mechanisms[p]}),
                     "modules_from": source, "success": bool(r["success"]), "reward": float(r["reward"] or 0.0),
                     "n_candidates": x.n_candidates, "candidates_read": read if x.candidates else None,
                     "_paths": set((modules or {}).values()) if modules else None})
    tasks = pd.DataFrame(rows, columns=MECHANISM_TASK_COLUMNS + ["_paths"])
    if len(tasks) and tasks["stream_index"].notna().any():
        tasks = tasks.sort_values("stream_index", kind="stable")
    known = tasks[tasks["_paths"].notna()]
    out = []
    for path, studies in mechanisms.items():
        chosen = known["_paths"].map(lambda paths, p=path: p in paths).astype(bool)
        yes, no = known[chosen], known[~chosen]
        out.append({"mechanism": short(path), "role": option(path).role,
                    "case_studies": ", ".join(n.split("/")[-1] for n in studies),
                    # the mean of no rows is NaN: a side with no task
                    "tasks_chosen": len(yes), "success_chosen": yes["success"].mean(),
                    "reward_chosen": yes["reward"].mean(), "tasks_not_chosen": len(no),
                    "success_not_chosen": no["success"].mean(), "reward_not_chosen": no["reward"].mean(),
                    "candidates_with": sum(path in c for c in cand_rows), "candidates_read": len(cand_rows)})
    summary = pd.DataFrame(out, columns=MECHANISM_COLUMNS)
    summary = summary.sort_values(["tasks_chosen", "candidates_with"], ascending=False, kind="stable")
    return tasks.drop(columns="_paths").reset_index(drop=True), summary.reset_index(drop=True)


CLASS_COUNT_COLUMNS = ["role", "class", "tasks", "share", "success"]


def class_counts(tasks):
    """Over a run's tasks (:func:`mechanism_usage`'s ``tasks``): per role M/P/F/A/H and library class, how many
    tasks' harnesses carried it (``tasks``; H ``none``: no hooks.py), their ``share`` of the tasks whose modules
    are known, and the success rate on them; most carried first within each role. Tasks whose modules are
    missing count nowhere."""
    import pandas as pd

    known = tasks[tasks[list(SPACE)].notna().any(axis=1)]
    rows = []
    for role in SPACE:
        for cls, group in known.groupby(known[role].fillna("(no library class)"), sort=True):
            rows.append({"role": role, "class": cls, "tasks": len(group), "share": len(group) / len(known),
                         "success": group["success"].mean()})
    out = pd.DataFrame(rows, columns=CLASS_COUNT_COLUMNS)
    order = {r: i for i, r in enumerate(SPACE)}
    return out.sort_values(["role", "tasks"], key=lambda c: c.map(order) if c.name == "role" else -c,
                           kind="stable").reset_index(drop=True)


# -- figures written by notebooks ----------------------------------------------------------------
def register_figure(fig_dir: str | Path, stem: str, files, title: str, command: str, caption: str = "",
                    numbers=None, **more) -> Path:
    """List ``files`` (paths inside ``fig_dir``, or a folder of them) under ``stem`` in
    ``fig_dir/figures.json`` and ``fig_dir/README.md`` (:func:`jitlab.viz.figures.register`). ``numbers``
    (a DataFrame or markdown text) is printed under the figure; ``more`` is stored in the entry (e.g.
    ``final_accuracy`` rows, which README's closing note tabulates)."""
    import datetime as dt

    fig_dir = Path(fig_dir)
    root = fig_dir.resolve()
    names = []
    for f in [files] if isinstance(files, (str, Path)) else files:
        f = Path(f).resolve() if Path(f).is_absolute() else root / f
        names += sorted(str(p.relative_to(root)) for p in f.glob("*") if p.is_file()) if f.is_dir() \
            else [str(f.relative_to(root))]
    if numbers is not None and not isinstance(numbers, str):
        numbers = markdown_table(numbers)
    entry = {"stem": stem, "files": names, "title": title, "caption": caption, "command": command,
             "numbers": numbers, "generated": dt.datetime.now().isoformat(timespec="seconds"), **more}
    return register(fig_dir, [entry])


def save_figure(fig, fig_dir: str | Path, stem: str, title: str, command: str, caption: str = "", numbers=None,
                formats=("png", "pdf", "html"), **more) -> list[Path]:
    """Save a jitlab.viz.figures figure as ``fig_dir/stem.{png,pdf,html}`` and list it in README.md
    (:func:`register_figure`). Returns the written paths (the PNG first when written)."""
    paths = save(fig, Path(fig_dir) / stem, formats)
    register_figure(fig_dir, stem, [p.resolve() for p in paths], title, command, caption, numbers, **more)
    return paths


