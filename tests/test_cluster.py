"""The Ray executor (jitlab/cluster.py) on a real local Ray started by this module (``ray.init(num_cpus=2)``, one
cluster for all its tests): a grid and a static JIT run give the same records as the local executor, and a grid
whose worker is SIGKILLed mid-cell fails that cell only and resumes with no episode lost or duplicated.
Backbones are scripted test doubles; the toy suite. A two-task static JIT run on Ray is in the default run; the
comparison of static JIT with the local executor and the batch test are slow (``make test-slow``):
``pytest -m slow tests/test_cluster.py`` runs them."""
import json
import os
import signal
import threading
import time

import pytest

from jitlab import experiments as X
from jitlab.errors import ConfigError, InfraError
from jitlab.store import load

ray = pytest.importorskip("ray")

HARNESSES = ["react", "plan_and_execute"]
BACKBONES = ["scripted:pick-first", "scripted:pick-hash"]
# what must agree between executors: everything an episode computed (not ids, times or the worker it ran in)
EPISODE_COLS = ["harness", "harness_sha", "task_id", "seed", "status", "success", "reward", "steps", "prompt_tokens",
                "completion_tokens", "cost", "tool_calls", "llm_calls", "cached_calls"]


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, log_to_driver=False, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_grid(tmp_path_factory):
    """The 2 x 2 grid on the local executor: the rows every Ray grid here must reproduce."""
    return X.run_grid("toy", HARNESSES, BACKBONES, limit=2, out_root=tmp_path_factory.mktemp("local"), cache=False)


def _final_rows(run_dirs) -> list:
    rows = []
    for d in sorted(map(str, run_dirs)):
        eps = load(d)["episodes"]
        eps = eps[eps["final"]]
        rows += [(os.path.basename(d), *r) for r in eps[EPISODE_COLS].sort_values(["task_id"]).itertuples(index=False)]
    return rows


def test_unknown_executor_and_ray_streaming_are_config_errors(tmp_path):
    from jitlab.jit.inference import JITConfig
    with pytest.raises(ConfigError, match="executor must be one of local, ray"):
        X.run_grid("toy", ["react"], ["scripted:pick-first"], out_root=tmp_path, executor="dask")
    with pytest.raises(ConfigError, match="streaming .* runs locally"):
        JITConfig(suite="toy", mode="streaming", executor="ray").check()


def test_ray_grid_records_the_same_episodes_as_local(cluster, local_grid, tmp_path):
    local = local_grid
    remote = X.run_grid("toy", HARNESSES, BACKBONES, limit=2, out_root=tmp_path / "ray", cache=False, executor="ray")
    assert len(remote) == 4 and list(remote["harness"]) == list(local["harness"])
    cols = ["suite", "harness", "backbone", "n_episodes", "success_rate", "tokens_per_task", "tool_calls_per_task"]
    assert remote[cols].equals(local[cols])
    rows = _final_rows(remote["run_dir"])
    assert len(rows) == 8 and rows == _final_rows(local["run_dir"])


def test_killed_worker_fails_its_cell_only_and_the_rerun_loses_and_duplicates_nothing(cluster, local_grid, tmp_path):
    # a slow double (0.1 s per call, no replay cache) so the cell is mid-episode when its worker is killed
    opts = dict(limit=2, cache=False, backbone_options={"delay_s": 0.05})   # the delay changes no reply
    root = tmp_path / "ray"
    failure, killed = [], []

    def grid():
        try:
            X.run_grid("toy", HARNESSES, BACKBONES, out_root=root, executor="ray", workers=2, **opts)
        except InfraError as exc:
            failure.append(exc)
    thread = threading.Thread(target=grid)
    thread.start()
    deadline = time.time() + 120
    while not killed and time.time() < deadline and thread.is_alive():
        for db in root.rglob("run.sqlite"):   # a cell with a finished episode and one in flight: kill its writer
            eps = load(db.parent)["episodes"]
            if (eps["status"] == "running").any() and eps["final"].any():
                pid = int((db.parent / "run.lock").read_text().split()[0])
                assert pid != os.getpid()
                os.kill(pid, signal.SIGKILL)
                killed.append(db.parent)
                break
        time.sleep(0.05)
    thread.join(180)
    assert killed and failure, "no cell was killed mid-run"
    assert "Ray worker died" in str(failure[0]) and "rerun" in str(failure[0])
    eps = load(killed[0])["episodes"]
    assert (eps["status"] == "running").sum() == 1 and eps["final"].sum() < 2    # the killed cell stopped half-way
    others = [d for d in root.glob("toy/*") if d != killed[0]]
    assert all(load(d)["episodes"]["final"].sum() == 2 for d in others)          # the other cells finished

    again = X.run_grid("toy", HARNESSES, BACKBONES, out_root=root, executor="ray", workers=2, **opts)
    assert set(again["n_episodes"]) == {2}
    assert _final_rows(again["run_dir"]) == _final_rows(local_grid["run_dir"])  # nothing lost, nothing twice
    eps = load(killed[0])["episodes"]
    assert (eps["status"] == "interrupted").sum() == 1 and eps.groupby("task_id")["final"].sum().eq(1).all()


def test_static_jit_on_ray_solves_its_tasks(cluster, tmp_path):
    """Issue 27 item 14: ``jitlab jit --suite toy --mode static --executor ray --backbone scripted:pick-hash
    --limit 2 --n-candidates 1 --retrieval bm25 --no-cache`` failed every task with ``AttributeError: 'JITEngine' object
    has no attribute 'bar'`` (the worker calls solve(); only run() made the bar). The default run covers the Ray
    static path with this small run; the slow test below compares it with the local executor."""
    from jitlab.jit.inference import JITConfig, run_jit
    from jitlab.sandbox import probe
    out = run_jit(JITConfig(suite="toy", mode="static", backbone="scripted:pick-hash", limit=2, n_candidates=1,
                            retrieval="bm25", cache=False, smoke_steps=1, quiet=True, executor="ray", concurrency=2,
                            allow_unisolated=not probe()[0], out=str(tmp_path / "ray")))
    eps = load(out)["episodes"]
    assert eps["final"].sum() == 2 and set(eps[eps["final"]]["status"]) <= {"ok", "budget"}
    assert json.loads((out / "summary.json").read_text())["n_episodes"] == 2


def test_the_ray_workers_function_solves_a_static_task_in_process(tmp_path):
    """Issue 27 item 14, without starting Ray: the function each Ray worker runs (``_solve_on_worker``) solves a
    task and returns its records; on main it raised ``AttributeError: 'JITEngine' object has no attribute 'bar'``."""
    from dataclasses import asdict

    from jitlab.jit.inference import JITConfig, _solve_on_worker
    from jitlab.sandbox import probe
    cfg = JITConfig(suite="toy", mode="static", backbone="scripted:pick-hash", limit=1, n_candidates=1,
                    retrieval="bm25", cache=False, smoke_steps=1, quiet=True, executor="ray",
                    allow_unisolated=not probe()[0], out=str(tmp_path / "run"))
    r = _solve_on_worker(asdict(cfg), str(tmp_path / "run"), 0, (0.0, 0, time.time()))
    finished = [e["result"]["status"] for e in r["episodes"] if e["result"]]
    assert r["index"] == 0 and finished and finished[-1] in ("ok", "budget") and r["harnesses"]
    assert not (tmp_path / "run").exists()   # a worker writes nothing in the run directory
    # the wall cap counts from the driver's start (passed as a time.time() reading), not from the worker's
    walled = asdict(cfg) | {"max_wall_total_s": 5.0}
    r = _solve_on_worker(walled, str(tmp_path / "run"), 0, (0.0, 0, time.time() - 60))
    assert r["spend_stopped"].startswith("wall cap reached") and "--max-wall-total-s 5" in r["spend_stopped"]
    assert not [e for e in r["episodes"] if e["result"] and e["result"]["status"] in ("ok", "budget")]


@pytest.mark.slow   # ~30 s: every candidate is validated in the sandbox, twice (local, then Ray)
def test_static_jit_on_ray_records_the_same_as_local_and_the_driver_alone_writes(cluster, tmp_path):
    from jitlab.jit.bank import Bank
    from jitlab.jit.inference import JITConfig, run_jit
    from jitlab.sandbox import probe
    base = dict(suite="toy", mode="static", backbone="scripted:pick-hash", limit=3, n_candidates=2, retrieval="bm25",
                cache=False, smoke_steps=2, quiet=True, allow_unisolated=not probe()[0])
    local = run_jit(JITConfig(**base, out=str(tmp_path / "local")))
    remote = run_jit(JITConfig(**base, out=str(tmp_path / "ray"), executor="ray", concurrency=2))
    a, b = load(local), load(remote)
    cols = EPISODE_COLS[1:]
    key = lambda eps: eps[eps["final"]][cols].sort_values("task_id").reset_index(drop=True)
    assert len(key(b["episodes"])) == 3 and key(b["episodes"]).equals(key(a["episodes"]))
    assert len(b["calls"]) == len(a["calls"]) and len(b["steps"]) == len(a["steps"])
    assert sorted(b["calls"]["phase"]) == sorted(a["calls"]["phase"])
    extras = lambda f: sorted((json.loads(x)["valid_candidates"], json.loads(x)["harness_dir"])
                              for x in f["episodes"]["extra"])
    assert extras(b) == extras(a)
    for _, harness_dir in extras(b):   # every harness that ran is in the run directory the driver wrote
        assert (remote / harness_dir / "action.py").is_file()
    assert len(Bank(remote / "bank.sqlite")) == 13                  # static: B0, never written
    assert json.loads((remote / "summary.json").read_text())["n_episodes"] == 3
    again = run_jit(JITConfig(**base, out=str(tmp_path / "ray"), executor="ray"))   # resumes: nothing to do
    assert len(load(again)["episodes"]) == len(b["episodes"])


@pytest.mark.slow   # ~20 s: two Jupyter kernels started on Ray workers, twice
def test_batch_on_ray_isolates_a_failing_run_and_reruns_skip_ok_ones(cluster, tmp_path):
    pytest.importorskip("papermill")
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "viz"))
    from test_batch import _notebook

    from jitlab.batch import BatchConfig, run_batch
    nb = _notebook(tmp_path / "tiny.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text("x: [1]\nfail: [false]\nruns:\n  - {x: 3, fail: true}\n")
    out = tmp_path / "batch"
    cfg = BatchConfig(notebook=str(nb), grid=str(grid), out=str(out), parallel=2, cwd="run", executor="ray")
    manifest = run_batch(cfg, echo=lambda *_: None)
    assert manifest["summary"] == {"total": 2, "ok": 1, "failed": 1, "skipped": 0}
    by_x = {r["params"]["x"]: r for r in json.loads((out / "manifest.json").read_text())["runs"]}
    assert "ValueError: broken parameter set x=3" in by_x[3]["error"]
    assert (out / by_x[1]["id"] / "out_1.txt").read_text() == "2"     # ran in its own OUT/<id>/ on a Ray worker
    again = run_batch(cfg, echo=lambda *_: None)
    assert again["summary"] == {"total": 2, "ok": 1, "failed": 1, "skipped": 1}


@pytest.mark.slow   # ~15 s: a Jupyter kernel started on a Ray worker
def test_batch_on_ray_stops_a_notebook_in_flight_at_its_wall_cap(cluster, tmp_path, monkeypatch):
    """As on the local executor (tests/viz/test_batch.py): the batch's clock is injected, so the cap is reached once
    the notebook has started; its Ray task is cancelled, its kernel dies, the run is marked failed."""
    pytest.importorskip("papermill")
    psutil = pytest.importorskip("psutil")
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "viz"))
    from test_batch import _sleepy

    from jitlab import batch
    from jitlab import cluster as C
    from jitlab.errors import JitlabError
    from jitlab.runtime import RunSpend
    _sleepy(tmp_path / "nb.ipynb")
    out = tmp_path / "batch"
    logs = lambda: sorted(out.glob("*/log.txt"))   # noqa: E731
    monkeypatch.setattr(C, "POLL_S", 0.2)
    monkeypatch.setattr(batch, "RunSpend", lambda **caps: RunSpend(**caps, clock=lambda: 100.0 if logs() else 0.0,
                                                                   started=0.0))
    cfg = batch.BatchConfig(notebook=str(tmp_path / "nb.ipynb"), out=str(out), parallel=1, cwd="run", executor="ray",
                            max_wall_total_s=60)
    with pytest.raises(JitlabError, match=r"^batch wall cap reached: 100\.00s of --max-wall-total-s 60 "):
        batch.run_batch(cfg, combos=[{"go": str(tmp_path / "never")}], echo=lambda *_: None)
    run = json.loads((out / "manifest.json").read_text())["runs"][0]
    assert run["status"] == "failed" and run["error"].startswith("batch stopped (wall cap reached: 100.00s")
    kernel = int(logs()[0].read_text().split()[1])

    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    deadline = time.time() + 15
    while time.time() < deadline and alive(kernel):
        time.sleep(0.1)
    assert not alive(kernel) and logs()[0].read_text().split()[0::2] == ["start"]


def test_a_cell_that_cannot_start_raises_its_own_error_after_the_others_finish(cluster, tmp_path, caplog):
    from jitlab.errors import UnknownName
    with pytest.raises(UnknownName, match="no_such_harness"):
        X.run_grid("toy", ["no_such_harness", "react"], ["scripted:pick-first"], limit=1, out_root=tmp_path,
                   executor="ray")
    assert "grid cell toy · no_such_harness · scripted:pick-first failed" in caplog.text
    assert (tmp_path / "toy" / "react-scripted_pick-first" / "summary.json").exists()
