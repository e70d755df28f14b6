"""The sandboxed agent behaves like the in-process one, validate() reports typed diagnostics, and
set-up failures are InfraErrors (never harness diagnostics)."""
import time
import warnings

import pytest
from sandbox_helpers import MEMORY, action, descendants, episode, requires_bwrap, small_config, solver, write_harness

from jitlab.envs.toy import ToySuite
from jitlab.errors import InfraError
from jitlab.harness import load_harness, seed_names
from jitlab.llm.scripted import ScriptedBackbone, get_scripted
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode
from jitlab.sandbox import ISOLATED, UNISOLATED, SandboxedAgent, SandboxSetupError, validate

pytestmark = requires_bwrap


def in_process(folder, backbone, task=0, budget=None):
    spec = ToySuite().tasks()[task]
    budget = budget or Budget()
    llm = LLMHandle(backbone, budget)
    records = []
    result = run_episode(ToySuite().make_env(spec), HarnessAgent(load_harness(folder), llm), llm, budget,
                         on_step=records.append)
    return result, records, llm


def comparable(records):
    return [{k: r[k] for k in ("tool", "args", "thought", "observation", "reward", "done", "tokens", "trace")}
            for r in records]


@pytest.mark.parametrize("harness", ["tiny", "react"])
def test_sandboxed_episode_matches_in_process(tmp_path, harness):
    folder = write_harness(tmp_path / "tiny") if harness == "tiny" else "react"
    spec = ToySuite().tasks()[2]
    direct, direct_records, direct_llm = in_process(folder, solver(spec), task=2)
    boxed, agent, boxed_records, boxed_llm = episode(folder, small_config(), backbone=solver(spec), task=2)
    assert agent.isolation == ISOLATED
    assert direct.success and boxed.success and boxed.status == "ok"
    assert comparable(boxed_records) == comparable(direct_records)
    assert (boxed_llm.tokens, boxed_llm.calls, boxed_llm.cost) == (direct_llm.tokens, direct_llm.calls, direct_llm.cost)
    assert agent.stats["episodes"] == 1 and agent.stats["llm_calls"] == boxed_llm.calls


def test_score_calls_are_brokered_and_missing_score_is_forwarded(tmp_path):
    body = """
try:
    scores = ctx.llm.score([{'role': 'user', 'content': 'take coin'}], ['take coin', 'go north'])
except NotImplementedError as exc:
    scores = 'none: ' + str(exc)
return Decision('act', {'command': 'look'}, thought=repr(scores))
"""
    folder = write_harness(tmp_path / "cand", action_py=action(body))
    _, agent, records, _ = episode(folder, backbone=get_scripted("pick-first"))
    expected = get_scripted("pick-first").score([{"role": "user", "content": "take coin"}], ["take coin", "go north"])
    assert records[0]["thought"] == repr(expected) and agent.stats["llm_calls"] == len(records)

    class NoScore:
        id = "scripted:no-score"
        chat = ScriptedBackbone(["x"]).chat
    _, _, records, _ = episode(folder, backbone=NoScore())
    assert records[0]["thought"].startswith("'none: backbone scripted:no-score has no score()")


def test_token_budget_ends_the_episode_as_budget_like_in_process(tmp_path):
    folder = write_harness(tmp_path / "tiny")
    direct, _, _ = in_process(folder, get_scripted("pick-first"), budget=Budget(max_tokens=30))
    boxed, agent, _, _ = episode(folder, backbone=get_scripted("pick-first"), budget=Budget(max_tokens=30))
    assert direct.status == boxed.status == "budget" and boxed.steps == direct.steps
    assert agent.diagnostic is not None  # the child saw the error; the episode records the parent's verdict


def test_harness_that_swallows_budget_errors_continues_like_in_process(tmp_path):
    body = """
try:
    text = ctx.llm.chat([{'role': 'user', 'content': 'go'}]).text
except Exception as exc:
    text = type(exc).__name__
return Decision('act', {'command': 'look'}, thought=text)
"""
    folder = write_harness(tmp_path / "cand", action_py=action(body))
    direct, direct_records, _ = in_process(folder, get_scripted("look"), budget=Budget(max_tokens=12))
    boxed, _, boxed_records, _ = episode(folder, backbone=get_scripted("look"), budget=Budget(max_tokens=12))
    assert boxed.status == direct.status == "ok"
    assert [r["thought"] for r in boxed_records] == [r["thought"] for r in direct_records]
    assert "BudgetExceeded" in boxed_records[-1]["thought"]


def test_backbone_parameters_outside_the_allow_list_are_protocol_errors(tmp_path):
    body = "ctx.llm.chat([{'role': 'user', 'content': 'x'}], api_base='http://attacker')\nreturn None"
    folder = write_harness(tmp_path / "cand", action_py=action(body))
    result, agent, _, llm = episode(folder)
    assert result.status == "harness_error" and agent.diagnostic.kind == "protocol_error"
    assert "api_base" in agent.diagnostic.message and llm.calls == 0


@pytest.mark.parametrize("files,kind,file,line", [
    ({"action_py": "from jitlab.protocol import Decision\n\nclass Action:\n    def act(self, c, ctx)\n        pass\n"},
     "parse_error", "action.py", 4),
    ({"action_py": "class Acting:\n    def act(self, c, ctx):\n        pass\n"},
     "interface_mismatch", "action.py", None),
    ({"planning_py": "class Planner:\n    pass\n"}, "interface_mismatch", "planning.py", None),
    ({"memory_py": "import os\n\nraise ValueError('broken at import')\n" + MEMORY}, "import_error", "memory.py", 3),
    ({"tool_policy_py": "class CapabilityPolicy:\n    def __init__(self):\n        1 / 0\n\n"
                        "    def select(self, *a):\n        return []\n"}, "runtime_error", "tool_policy.py", 3),
    ({"prompt_yaml": "system: [unclosed\n"}, "parse_error", "prompt.yaml", None),
])
def test_validate_reports_typed_diagnostics(tmp_path, files, kind, file, line):
    folder = write_harness(tmp_path / "cand", **files)
    checked = validate(folder, small_config())
    assert not checked.ok and checked.isolation == ISOLATED
    assert (checked.diagnostic.kind, checked.diagnostic.file, checked.diagnostic.phase) == (kind, file, "load")
    if line is not None:
        assert checked.diagnostic.line == line
    assert "/sandbox/harness" not in checked.diagnostic.traceback


def test_validate_accepts_good_harnesses(tmp_path):
    for harness in (write_harness(tmp_path / "tiny"), "react"):
        checked = validate(harness, small_config())
        assert checked.ok and checked.diagnostic is None and len(checked.sha) == 64
    assert checked.name == "react" and checked.sha == load_harness("react").sha


def test_runtime_error_carries_a_trimmed_traceback(tmp_path):
    folder = write_harness(tmp_path / "cand", action_py=action("values = []\nreturn values[3]"))
    result, agent, _, _ = episode(folder)
    diag = agent.diagnostic
    assert (diag.kind, diag.file, diag.line, diag.phase) == ("runtime_error", "action.py", 11, "decide")
    assert diag.traceback.startswith('  File "action.py", line 11') and "IndexError" in diag.traceback
    assert result.diagnostic == diag.as_dict()     # the episode record keeps line, traceback and phase


def test_missing_bubblewrap_refuses_unless_opted_out(tmp_path):
    folder = write_harness(tmp_path / "tiny")
    config = small_config(bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxSetupError, match="refusing to run untrusted harness code") as caught:
        validate(folder, config)
    assert isinstance(caught.value, InfraError)
    with pytest.raises(InfraError):
        SandboxedAgent(folder, LLMHandle(get_scripted("look")), config)
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        checked = validate(folder, small_config(bwrap="/nonexistent/bwrap", allow_unisolated=True))
    assert checked.ok and checked.isolation == UNISOLATED


def test_child_that_cannot_start_is_an_infra_error_not_a_diagnostic(tmp_path):
    folder = write_harness(tmp_path / "tiny")
    broken = small_config(memory_mb=1)  # the child cannot even finish its own set-up
    with pytest.raises(SandboxSetupError, match="did not start"):
        validate(folder, broken)
    result, _, _, _ = episode(folder, broken)
    assert result.status == "infra_error" and result.diagnostic == {}
    assert descendants() == []


def test_child_stops_after_the_final_observation_or_close(tmp_path):
    folder = write_harness(tmp_path / "tiny")
    spec = ToySuite().tasks()[0]
    llm = LLMHandle(solver(spec), Budget())
    agent = SandboxedAgent(folder, llm, small_config())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run_episode(ToySuite().make_env(spec), agent, llm, Budget())
    assert result.success and agent._child is None and descendants() == []
    agent.llm = LLMHandle(get_scripted("look"), Budget())  # never finishes: the child idles after max_steps
    result = run_episode(ToySuite().make_env(spec), agent, agent.llm, Budget())
    assert not result.success and agent.stats["episodes"] == 2 and len(descendants()) > 0
    agent.close()
    assert descendants() == []


@pytest.mark.parametrize("seed", seed_names())
def test_every_seed_runs_sandboxed_like_in_process(seed):
    direct, direct_records, direct_llm = in_process(seed, get_scripted("pick-hash"), task=1)
    boxed, _, boxed_records, boxed_llm = episode(seed, small_config(), backbone=get_scripted("pick-hash"), task=1)
    assert boxed.status == "ok", boxed.diagnostic
    assert (boxed.status, boxed.success, boxed.steps) == (direct.status, direct.success, direct.steps)
    assert comparable(boxed_records) == comparable(direct_records)
    assert (boxed_llm.tokens, boxed_llm.calls) == (direct_llm.tokens, direct_llm.calls)


def test_harness_threads_may_call_the_backbone(tmp_path):
    body = """
import threading
replies = []
def ask(i):
    replies.append(ctx.llm.chat([{'role': 'user', 'content': f'q{i}'}]).text)
threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
return Decision('act', {'command': 'look'}, thought=str(len(replies)))
"""
    folder = write_harness(tmp_path / "cand", action_py=action(body))
    result, agent, records, llm = episode(folder, backbone=get_scripted("look"))
    assert result.status == "ok" and {r["thought"] for r in records} == {"4"}
    assert llm.calls == 4 * len(records) == agent.stats["llm_calls"]


@pytest.mark.parametrize("where", ["act", "import"])
def test_episode_wall_budget_bounds_a_hung_child(tmp_path, where):
    """Issue 27 item 3: ``jitlab run --suite toy --harness ./hang --backbone scripted:pick-first --max-wall-s 10
    --limit 1 --no-cache`` with a harness whose act() (or import) sleeps ran 60 s and ended as ``timeout_wall``
    at the sandbox's fixed limit; the episode's own wall budget now bounds the child and ends it as ``budget``."""
    hang = "import time\ntime.sleep(10 ** 6)"
    files = {"action_py": action(hang)} if where == "act" else {"action_py": action(top=hang)}
    folder = write_harness(tmp_path / "hang", **files)
    start = time.monotonic()
    result, agent, _, _ = episode(folder, small_config(wall_s=60.0), budget=Budget(max_wall_s=1.5))
    elapsed = time.monotonic() - start
    assert result.status == "budget" and "wall budget 1.5s spent" in result.error, result
    assert agent.diagnostic.kind == "timeout_wall" and agent.diagnostic.phase == ("decide" if where == "act" else "load")
    assert elapsed < 1.5 + 15  # far below the sandbox's own 60 s (slack for start-up on a loaded machine)
