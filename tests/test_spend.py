"""Run-level spend caps (--max-cost, --max-tokens-total) with a priced scripted test double: the cap stops
the run, nothing is lost, and a rerun with a higher cap finishes it with the results an uncapped run gets
(issue 17, "no runaway spend"). scripted:* doubles charge a nominal $1 per million tokens
(jitlab.llm.scripted.PRICE_PER_TOKEN), so every call has a real, deterministic cost. The wall cap
(--max-wall-total-s, issue 44) stops a run the same way, on a clock injected where the point must be exact."""
import json
import time

import pytest

from jitlab.cli import main
from jitlab.errors import ConfigError
from jitlab.run_options import NOT_FINGERPRINTED, shared_spend
from jitlab.runner import RunConfig, cost_estimate, known_price, run
from jitlab.runtime import RunSpend, SpendCapReached
from jitlab.store import load

BACKBONE = "scripted:pick-hash"


def _cfg(out, **kw):
    # no replay cache: every call reaches the backbone and costs money
    return RunConfig(suite="toy", harness="react", backbone=BACKBONE, limit=4, out=str(out), cache=False, quiet=True,
                     **kw)


def _final(out):
    eps = load(out)["episodes"]
    return eps[eps["final"]].sort_values("task_id")


def _results(out):
    return [(r.task_id, r.status, r.reward, r.steps, r.tokens) for r in _final(out).itertuples()]


@pytest.fixture
def reference(tmp_path):
    """The same 4 episodes without a cap: what a capped run must end up with."""
    out = run(_cfg(tmp_path / "reference"))
    return out, _final(out)


def test_the_cap_stops_between_episodes_and_a_higher_cap_resumes(tmp_path, reference):
    ref_dir, ref = reference
    # a cap reached exactly when the second episode ends: its last call may start, the third episode may not
    cap = float(ref["cost"].iloc[:2].sum()) - 1e-12
    out = tmp_path / "capped"
    with pytest.raises(SpendCapReached, match=r"spend cap reached: .* of --max-cost .*2 of 4 episodes finished"):
        run(_cfg(out, max_cost=cap))
    eps = load(out)["episodes"]
    assert list(eps["status"]) == ["ok", "ok"]                     # stopped between episodes: none cut short
    assert json.loads((out / "summary.json").read_text())["n_episodes"] == 2
    assert float(load(out)["calls"]["cost"].sum()) == pytest.approx(cap, abs=1e-9)

    run(_cfg(out, max_cost=1.0))  # the cap is not part of the config: no ConfigDrift, the run resumes
    assert _results(out) == _results(ref_dir)
    assert len(load(out)["episodes"]) == 4                           # nothing repeated, nothing lost


def test_an_episode_in_flight_stops_as_spend_cap_and_is_rerun(tmp_path, reference):
    ref_dir, ref = reference
    out = tmp_path / "capped"
    with pytest.raises(SpendCapReached, match="0 of 4 episodes finished"):
        run(_cfg(out, max_cost=float(ref["cost"].iloc[0]) / 2))      # reached inside the first episode
    eps = load(out)["episodes"]
    assert list(eps["status"]) == ["spend_cap"]                      # not a harness failure, not final
    assert eps["error"].iloc[0].startswith("spend cap reached")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_episodes"] == 0 and summary["status_counts"] == {}
    run(_cfg(out, max_cost=1.0))
    assert _results(out) == _results(ref_dir)                        # the stopped task ran again, in full
    assert list(load(out)["episodes"].sort_values("id")["attempt"]) == [0, 1, 0, 0, 0]


def test_token_cap_and_the_spend_of_earlier_invocations_counts(tmp_path, reference):
    ref_dir, ref = reference
    out = tmp_path / "capped"
    first_two = int(ref["tokens"].iloc[:2].sum())
    with pytest.raises(SpendCapReached, match="--max-tokens-total"):
        run(_cfg(out, max_tokens_total=first_two))
    assert len(_final(out)) == 2
    # resumed with the same cap: the recorded spend is read back, so nothing new starts
    with pytest.raises(SpendCapReached):
        run(_cfg(out, max_tokens_total=first_two))
    assert len(load(out)["episodes"]) == 2
    run(_cfg(out, max_tokens_total=10 * first_two))
    assert _results(out) == _results(ref_dir)


def test_cache_hits_cost_nothing(tmp_path):
    warm = run(RunConfig(suite="toy", backbone=BACKBONE, limit=2, out=str(tmp_path / "warm"), quiet=True))
    assert len(_final(warm)) == 2
    # the same episodes replayed from the cache spend nothing, so even a tiny cap lets them finish
    again = run(RunConfig(suite="toy", backbone=BACKBONE, limit=2, out=str(tmp_path / "again"), quiet=True,
                          max_cost=1e-9))
    assert _results(again) == _results(warm)


def test_a_sandboxed_episode_stopped_by_the_cap_is_not_a_harness_error(tmp_path):
    import shutil

    from jitlab.harness import load_harness
    folder = tmp_path / "my_harness"
    shutil.copytree(load_harness("react").folder, folder)
    out = tmp_path / "r"
    with pytest.raises(SpendCapReached):
        run(RunConfig(suite="toy", harness=str(folder), backbone=BACKBONE, limit=2, out=str(out), cache=False,
                      quiet=True, max_cost=0.0003))
    assert list(load(out)["episodes"]["status"]) == ["spend_cap"]


def test_cli_exit_code_message_and_estimate(tmp_path, capsys):
    out = str(tmp_path / "r")
    argv = ["run", "--suite", "toy", "--backbone", BACKBONE, "--limit", "3", "--no-cache", "--out", out]
    assert main(argv + ["--max-cost", "0.0005"]) == 2
    captured = capsys.readouterr()
    assert "estimated cost: at most $0.1800 (upper bound: 3 episode(s) x --max-tokens 60000 at $1/Mtok)" in captured.out
    assert f"{out}: 0 episodes" in captured.out                      # the summary is still printed
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "spend cap reached" in err[0] and "rerun with a higher --max-cost" in err[0]
    assert main(argv + ["--max-cost", "10"]) == 0
    assert "estimated cost: at most $0.1800 (upper bound: 3 episode(s)" in capsys.readouterr().out
    assert main(argv + ["--max-cost", "10"]) == 0                    # finished: nothing left to estimate
    assert "estimated cost" not in capsys.readouterr().out


def test_estimates_need_a_known_price():
    assert known_price("litellm:openai/no-such-model-anywhere") is None
    assert cost_estimate(RunConfig(backbone="litellm:openai/no-such-model-anywhere"), 3) == ""
    priced = {"pricing": {"litellm:openai/mine": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}}
    line = cost_estimate(RunConfig(backbone="litellm:openai/mine", backbone_options=priced, max_tokens=1000), 5)
    assert line == "estimated cost: at most $0.0400 (upper bound: 5 episode(s) x --max-tokens 1000 at $8/Mtok)"


def test_jit_cap_stops_and_resumes(tmp_path, monkeypatch):
    from jitlab.jit.generate import compose
    from jitlab.jit.inference import JITConfig, run_jit
    # chat actions only: the test double prices chat completions, and a likelihood action makes score calls alone
    full = compose.catalogue()
    monkeypatch.setattr(compose, "catalogue", lambda: {**full, "A": [o for o in full["A"] if "likelihood" not in o.path]})

    def cfg(out, **kw):
        return JITConfig(suite="toy", mode="streaming", backbone=BACKBONE, retrieval="bm25", limit=3, out=str(out),
                         cache=False, quiet=True, **kw)
    ref = run_jit(cfg(tmp_path / "reference"))
    ref_final = _final(ref)
    out = tmp_path / "capped"
    with pytest.raises(SpendCapReached, match="of 3 tasks finished"):
        run_jit(cfg(out, max_cost=float(ref_final["cost"].iloc[0]) * 1.5))
    statuses = list(load(out)["episodes"].sort_values("id")["status"])
    assert statuses[0] == "ok" and statuses[-1] == "spend_cap" and len(statuses) == 2
    run_jit(cfg(out, max_cost=10.0))
    got = _final(out)
    assert list(got["status"]) == list(ref_final["status"]) and list(got["reward"]) == list(ref_final["reward"])
    assert list(got["harness_sha"]) == list(ref_final["harness_sha"])


def test_a_grid_cap_counts_every_cell(tmp_path):
    from jitlab import experiments as X
    root = tmp_path / "grid"
    with pytest.raises(SpendCapReached):
        X.run_grid("toy", ["react", "plan_and_execute"], BACKBONE, limit=2, out_root=root, cache=False,
                   max_cost=0.002)
    cells = sorted(p.parent.name for p in root.rglob("run.sqlite"))
    spent = sum(load(root / "toy" / c)["calls"]["cost"].sum() for c in cells)
    assert spent < 0.002 + 0.001                                     # at most one call over the cap
    rows = X.run_grid("toy", ["react", "plan_and_execute"], BACKBONE, limit=2, out_root=root, cache=False,
                      max_cost=1.0)
    assert list(rows["n_episodes"]) == [2, 2]


def test_jit_estimate_counts_every_call_set():
    from jitlab.jit.inference import JITConfig, cost_estimate
    cfg = JITConfig(suite="toy", mode="static", backbone=BACKBONE, n_candidates=2, max_repair_rounds=1,
                    gen_max_tokens=100, max_tokens=1000)
    # 2 x 100 generation + (10 + 100) judge + 2 x 10 smoke + 1 x 2 x (10 + 100) repair + 1000 execution = 1550
    assert cost_estimate(cfg, 2, smoke_max_tokens=10) == ("estimated cost: at most $0.0031 (upper bound: 2 task(s) x "
                                                          "1550 tokens of call-set budgets at $1/Mtok)")
    assert cost_estimate(JITConfig(backbone="litellm:openai/no-such-model-anywhere"), 2, 10) == ""


class _Ticks:
    """A clock that moves one second each time it is read: the wall cap is reached after a known number of checks."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_wall_cap_counts_from_when_the_run_spend_is_made_on_an_injected_clock(tmp_path):
    now = [100.0]
    spend = RunSpend(max_wall_total_s=5.0, clock=lambda: now[0])
    assert spend.elapsed() == 0.0 and spend.reached() == ""
    now[0] = 104.9
    spend.check()                                                    # under the cap: nothing raised
    assert spend.stopped == ""
    now[0] = 105.0
    reason = "wall cap reached: 5.00s of --max-wall-total-s 5 (this invocation)"
    assert spend.reached() == reason
    with pytest.raises(SpendCapReached, match=r"^wall cap reached: 5\.00s of --max-wall-total-s 5 \(this invocation\)$"):
        spend.check()
    assert spend.stopped == reason
    # a spend cap reached too is named first; a new RunSpend (a rerun) counts its own time only, whatever was spent
    assert RunSpend(max_cost=1.0, cost=2.0, max_wall_total_s=5.0, clock=lambda: now[0], started=0.0).reached() \
        .startswith("spend cap reached")
    assert RunSpend(max_cost=10.0, cost=2.0, tokens=10**9, max_wall_total_s=5.0, clock=lambda: now[0]).reached() == ""
    real = RunSpend(max_wall_total_s=0.05)                           # the default clock: time.monotonic
    assert real.reached() == ""
    time.sleep(0.06)
    assert real.reached().startswith("wall cap reached")


def test_the_wall_cap_is_a_cap_of_the_command_and_not_of_the_config(tmp_path):
    assert shared_spend(tmp_path) is None                            # no cap: no shared RunSpend, as before
    only_wall = shared_spend(tmp_path, max_wall_total_s=60.0)
    assert only_wall is not None and only_wall.reached() == ""
    assert RunConfig(max_wall_total_s=60.0).command_spend(tmp_path).max_wall_total_s == 60.0
    assert "max_wall_total_s" in NOT_FINGERPRINTED
    assert "max_wall_total_s" not in RunConfig(max_wall_total_s=60.0).fingerprinted()
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="max-wall-total-s"):
            RunConfig(max_wall_total_s=bad)
        with pytest.raises(ConfigError, match="max_wall_total_s"):
            shared_spend(tmp_path, max_wall_total_s=bad)


def test_the_wall_cap_stops_an_episode_in_flight_and_a_rerun_resumes(tmp_path, reference):
    ref_dir, _ = reference
    out = tmp_path / "walled"
    # reads: when it is made, before the first episode, before its first call, before its second: reached there
    with pytest.raises(SpendCapReached, match=r"wall cap reached: .*0 of 4 episodes finished.*rerun to resume"):
        run(_cfg(out), spend=RunSpend(max_wall_total_s=3.0, clock=_Ticks()))
    eps = load(out)["episodes"]
    assert list(eps["status"]) == ["spend_cap"]                      # stopped in flight: not a result, not final
    assert eps["error"].iloc[0].startswith("wall cap reached")
    run(_cfg(out))                                                   # no cap: resumes, the stopped task run again
    assert _results(out) == _results(ref_dir)
    assert list(load(out)["episodes"].sort_values("id")["attempt"]) == [0, 1, 0, 0, 0]


def test_jitlab_run_stops_at_a_tiny_wall_cap_and_a_rerun_without_it_resumes(tmp_path, capsys, reference):
    ref_dir, _ = reference
    out = tmp_path / "r"
    argv = ["run", "--suite", "toy", "--harness", "react", "--backbone", BACKBONE, "--limit", "4", "--no-cache",
            "--quiet", "--out", str(out)]
    assert main([*argv, "--max-wall-total-s", "0.001"]) == 2           # four episodes never take a millisecond
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "wall cap reached: " in err[0] and "of --max-wall-total-s 0.001 (this invocation)" in err[0]
    assert "rerun to resume" in err[0]
    stopped = load(out)["episodes"]
    assert not stopped["final"].all() or len(stopped) < 4              # the records say it stopped
    assert set(stopped[~stopped["final"]]["status"]) <= {"spend_cap"}
    assert main(argv) == 0                                             # resumed: the cap is not in the config
    assert _results(out) == _results(ref_dir)


def test_the_repeats_of_a_jit_run_share_one_run_spend(tmp_path, monkeypatch):
    from jitlab.jit import inference
    seen = []

    def one(cfg, spend):  # what each repeat would run under; stops after the second
        seen.append(spend)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return tmp_path

    monkeypatch.setattr(inference, "_run_one", one)
    cfg = inference.JITConfig(suite="toy", mode="streaming", backbone="scripted:uniform", repeat=2,
                              backbone_options={"temperature": 0.7},
                              out=str(tmp_path / "r"), max_wall_total_s=60.0)
    with pytest.raises(KeyboardInterrupt):
        inference.run_jit(cfg)
    assert seen[0] is seen[1] and seen[0].max_wall_total_s == 60.0   # the whole command's, not each repeat's own
