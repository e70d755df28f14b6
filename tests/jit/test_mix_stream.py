"""The JIT on a mixed toy stream (``mix:toy+dbbench``, scripted backbone, a test double): every task runs in its own
suite's environment, its smoke episode is a dev task of its own suite, the records and the bank
key its family by (suite, family), and the same tasks in a shuffled order pair with the first order."""
import json

import pytest

from jitlab.compare import compare_runs
from jitlab.envs.base import get_suite
from jitlab.jit.bank import Bank
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.jit.repair import dev_task_for
from jitlab.store import load

MIX = "mix:toy+dbbench"


def _unisolated() -> bool:
    from jitlab.sandbox import probe
    return not probe()[0]


def _jit(out, suite=MIX, **kw):
    return run_jit(JITConfig(**{**dict(suite=suite, backbone="scripted:pick-hash", limit=5, retrieval="bm25",
                                       cache=False, out=str(out), smoke_steps=2, quiet=True,
                                       allow_unisolated=_unisolated()), **kw}))


def test_smoke_tasks_of_a_mix_come_from_each_tasks_own_suite():
    mix = get_suite(MIX)
    for task in mix.tasks("test")[:12]:
        dev = dev_task_for(mix, task)
        assert dev.suite == task.suite and dev.family == task.family and dev.split == "dev"


@pytest.mark.parametrize("mode", ["streaming", "static"])
def test_a_mixed_stream_runs_each_task_in_its_own_suite(tmp_path, mode):
    out = _jit(tmp_path / mode, mode=mode, **({"n_candidates": 2} if mode == "static" else {}))
    frames = load(out)
    eps = frames["episodes"].sort_values("id")
    want = get_suite(MIX).tasks("dev")[:5]
    assert list(eps["task_id"]) == [t.id for t in want] and list(eps["family"]) == [t.family for t in want]
    assert {t.suite for t in want} == {"toy", "dbbench"}
    steps = frames["steps"].merge(eps[["id", "family"]], left_on="episode_id", right_on="id")
    for family, obs in steps.groupby("family")["observation"]:   # each answered by its own suite's environment
        assert all(("Goal: " in o) == family.startswith("toy/") for o in obs), family
    extras = [json.loads(x) for x in eps["extra"]]
    assert [e["stream_index"] for e in extras] == list(range(5))
    if mode == "streaming":   # the bank keys each evaluation by its source suite and (suite, family)
        mine = [e for e in Bank(out / "bank.sqlite").evaluations() if e["task_id"] in {t.id for t in want}]
        assert {(e["suite"], e["family"]) for e in mine} == {(t.suite, t.family) for t in want}


def test_a_shuffled_stream_is_the_same_tasks_and_pairs_with_the_first_order(tmp_path):
    spec = tmp_path / "mix.yaml"
    spec.write_text("parts:\n  toy: {dev: 3}\n  dbbench: {dev: 3}\n")
    shuffled = tmp_path / "shuffled.yaml"
    shuffled.write_text(spec.read_text() + "shuffle: 1\n")
    runs = [_jit(tmp_path / name, suite=f"mix:{path}", limit=None) for name, path in (("a", spec), ("b", shuffled))]
    orders = [list(load(r)["episodes"].sort_values("id")["task_id"]) for r in runs]
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1] and len(orders[0]) == 6
    table, _, _ = compare_runs(runs)             # the same tasks in another order pair task by task
    assert table["n_tasks"].iloc[0] == 6
