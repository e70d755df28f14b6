"""Run-level spend caps (--max-cost, --max-tokens-total) with a priced scripted test double: the cap stops
the run, nothing is lost, and a rerun with a higher cap finishes it with the results an uncapped run gets
(issue 17, "no runaway spend"). scripted:* doubles charge a nominal $1 per million tokens
(jitlab.llm.scripted.PRICE_PER_TOKEN), so every call has a real, deterministic cost."""
import json

import pytest

from jitlab.cli import main
from jitlab.runner import RunConfig, cost_estimate, known_price, run
from jitlab.runtime import SpendCapReached
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
