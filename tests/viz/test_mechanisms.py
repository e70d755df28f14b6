"""experiments.mechanism_usage on a real streaming JIT run: toy suite, the scripted:pick-hash backbone (a test
double) and the compose generator, whose first candidate is replaced on alternate tasks by a case-study folder
(Turnstile) or the react seed (a test double of a generator that proposes them), so some tasks choose case-study
mechanisms and some do not. Every count and rate is checked against the run's own records, read independently:
the episodes' success/reward and each harness's files (``choices_of``, the thin-subclass reader)."""
import dataclasses

import pytest

from jitlab.cli import main
from jitlab.export import export_runs
from jitlab.harness import read_files, seed_bank_dir
from jitlab.jit.generate.base import Candidate
from jitlab.jit.generate.compose import ComposeGenerator
from jitlab.jit.generate.library import case_study_mechanisms, choices_of
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.store import load
from jitlab.viz import runs as R

TURNSTILE = "case_studies/turnstile"


def _unisolated() -> bool:
    from jitlab.sandbox import probe
    return not probe()[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    original = ComposeGenerator.generate

    def proposes_case_studies(self, task, references, llm=None, index=0, **kw):
        if index == 0:  # even tasks: Turnstile as is; odd tasks: the react seed
            n = int(task["id"].rsplit("-", 1)[1])
            folder = seed_bank_dir() / (TURNSTILE if n % 2 == 0 else "react")
            return Candidate(read_files(folder), self.name, index, [], None, None, {"strategy": "test-double"})
        return original(self, task, references, llm, index, **kw)
    mp = pytest.MonkeyPatch()
    mp.setattr(ComposeGenerator, "generate", proposes_case_studies)
    try:
        out = run_jit(JITConfig(suite="toy", backbone="scripted:pick-hash", mode="streaming", limit=4, n_candidates=2,
                                retrieval="bm25", cache=False, smoke_steps=2, quiet=True,
                                out=str(tmp_path_factory.mktemp("jit") / "r"), allow_unisolated=_unisolated()))
    finally:
        mp.undo()
    return out


def _paths(files) -> set:
    """The library classes of the four module roles (the hooks slot H is checked on its own)."""
    return {c.path for r, c in choices_of(files).items() if r not in ("prompt", "H") and c.kind == "library"}


def test_counts_and_success_match_the_records(run):
    tasks, mech = R.mechanism_usage(run)
    eps = load(run)["episodes"]
    done = eps[eps["final"]].set_index("task_id")
    assert len(tasks) == len(done) == 4 and set(tasks["modules_from"]) == {"record"}
    used = {}    # task -> library classes of the harness that ran, from its folder
    for row in tasks.itertuples():
        assert row.success == bool(done.loc[row.task_id, "success"])
        assert row.reward == pytest.approx(float(done.loc[row.task_id, "reward"]))
        used[row.task_id] = _paths(read_files(run / "harnesses" / done.loc[row.task_id, "harness_sha"]))
        assert {row.M, row.P, row.F, row.A} == {p.split(":")[1] for p in used[row.task_id]}
        hooks = choices_of(read_files(run / "harnesses" / done.loc[row.task_id, "harness_sha"]))["H"]
        assert row.H == hooks.path.split(":")[-1]
        assert set(row.mechanisms) == {p.split(":")[1] for p in used[row.task_id] if p in case_study_mechanisms()}
    turnstile = _paths(read_files(seed_bank_dir() / TURNSTILE)) & set(case_study_mechanisms())
    assert turnstile and all(turnstile <= used[t] for t in ("toy-dev-0", "toy-dev-2"))
    # candidates, from the run's candidates/ folders (each generated candidate's files, chosen or not)
    cand_sets = [_paths(read_files(run / "candidates" / sha[:16])) for sha in
                 [c["sha"] for x in R.open_run(run)["finished"]["jit_record"] for c in x.candidates]]
    assert len(cand_sets) == 8
    for row in mech.itertuples():
        path = next(p for p in case_study_mechanisms() if p.endswith(":" + row.mechanism))
        yes = [t for t in used if path in used[t]]
        no = [t for t in used if path not in used[t]]
        assert (row.tasks_chosen, row.tasks_not_chosen) == (len(yes), len(no))
        for side, names in (("chosen", yes), ("not_chosen", no)):
            rate, reward = getattr(row, f"success_{side}"), getattr(row, f"reward_{side}")
            if names:
                assert rate == pytest.approx(done.loc[names, "success"].astype(bool).mean())
                assert reward == pytest.approx(done.loc[names, "reward"].astype(float).mean())
            else:
                assert rate != rate and reward != reward  # NaN: no task on that side
        assert row.candidates_with == sum(path in c for c in cand_sets) and row.candidates_read == 8
    assert len(mech) == len(case_study_mechanisms()) and mech["tasks_chosen"].max() >= 2
    assert (mech["tasks_chosen"] > 0).any() and (mech["tasks_not_chosen"] > 0).all()


def test_an_export_and_a_record_without_modules_give_the_same_tables(run, tmp_path):
    tasks, mech = R.mechanism_usage(run)
    exported = export_runs([run], tmp_path / "results")[0]
    t2, m2 = R.mechanism_usage(exported)
    assert t2.equals(tasks) and m2.equals(mech)
    # a run recorded before extra.modules existed: the classes come from the files the run kept
    rec = R.open_run(run)
    rec["finished"]["jit_record"] = [dataclasses.replace(x, modules=None, jit={
        **x.jit, "candidates": [{k: v for k, v in c.items() if k != "modules"} for c in x.candidates]})
        for x in rec["finished"]["jit_record"]]
    t3, m3 = R.mechanism_usage(rec)
    assert set(t3["modules_from"]) == {"files"} and m3.equals(mech)
    assert t3.drop(columns="modules_from").equals(tasks.drop(columns="modules_from"))


def test_jitlab_show_prints_the_mechanism_table(run, capsys):
    _, mech = R.mechanism_usage(run)
    assert main(["show", str(run), "--mechanisms"]) == 0
    out = capsys.readouterr().out.split("case-study mechanisms in")[1]
    for row in mech.itertuples():
        line = next(ln for ln in out.splitlines() if ln.split()[:1] == [row.mechanism])
        assert line.split()[2 + len(row.case_studies.split())] == str(row.tasks_chosen)


def test_jitlab_show_prints_each_tasks_slots_and_the_class_counts_over_the_run(run, capsys):
    """Per task, the library class of each slot of the harness that ran (read here from its folder, independently of
    the record), and over the run how many tasks carried each class."""
    from collections import Counter

    from jitlab.jit.generate.library import SPACE, modules_of
    eps = load(run)["episodes"]
    done = eps[eps["final"]].sort_values("id")
    carried = {t: {r: p.split(":")[-1] for r, p in modules_of(read_files(run / "harnesses" / sha)).items()}
               for t, sha in zip(done["task_id"], done["harness_sha"])}
    counts = R.class_counts(R.mechanism_usage(run)[0])
    for role in SPACE:
        want = Counter(c[role] for c in carried.values())
        got = counts[counts["role"] == role]
        assert dict(zip(got["class"], got["tasks"])) == dict(want) and list(got["tasks"]) == sorted(want.values())[::-1]
        assert got["share"].sum() == pytest.approx(1.0)
    assert counts["tasks"].max() == len(carried) and counts["tasks"].min() < len(carried)  # some class not on every task
    assert main(["show", str(run), "--mechanisms"]) == 0
    out = capsys.readouterr().out
    per_task = out.split("mechanisms per task in")[1].split("library classes over")[0]
    for task, slots in carried.items():
        line = next(ln for ln in per_task.splitlines() if task in ln.split())
        assert line.split()[-6:-1] == [slots[r] for r in SPACE]
    over = out.split("library classes over")[1].split("case-study mechanisms in")[0]
    for row in counts.to_dict("records"):
        assert any(ln.split()[:3] == [row["role"], row["class"], str(row["tasks"])] for ln in over.splitlines())
