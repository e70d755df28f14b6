"""JITLAB_RECORD_CALLS: every backbone call of a process written as one JSON line (jitlab/llm/record.py), the streams
benchmarks/replay.py replays; here with the scripted TEST DOUBLES, and a real run on the toy suite."""
import json
import os

from jitlab.cli import main
from jitlab.llm import record
from jitlab.llm.lazy import LazyBackbone

MESSAGES = [{"role": "user", "content": "Pick one:\n- go east\n- go west"}]


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_chat_and_score_are_recorded_with_their_parameters_and_replies(tmp_path, monkeypatch):
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv(record.ENV, str(path))
    llm = LazyBackbone("scripted:uniform", {})
    reply = llm.chat(MESSAGES, max_new_tokens=12, stop=["\n"])
    scores = llm.score(MESSAGES, ["go east", "go west"])
    chat, score = _lines(path)
    assert chat["op"] == "chat" and chat["messages"] == MESSAGES and chat["params"] == {"max_new_tokens": 12, "stop": ["\n"]}
    assert chat["text"] == reply.text and chat["prompt_tokens"] == reply.prompt_tokens
    assert score["op"] == "score" and score["candidates"] == ["go east", "go west"] and score["scores"] == scores
    assert 0 <= chat["t0"] <= chat["t1"] <= score["t0"] <= score["t1"] and chat["thread"] == score["thread"]


def test_nothing_is_recorded_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(record.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    llm = LazyBackbone("scripted:look", {})
    llm.chat(MESSAGES)
    assert llm._recorder is None and not list(tmp_path.rglob("*.jsonl"))


def test_a_run_records_each_episode_thread_and_no_replay_cache_hit(tmp_path, monkeypatch):
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv(record.ENV, str(path))
    monkeypatch.setenv("JITLAB_HOME", str(tmp_path / "home"))
    args = ["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first", "--limit", "2",
            "--concurrency", "2", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    calls = _lines(path)
    assert calls and {c["op"] for c in calls} == {"chat"} and len({c["thread"] for c in calls}) == 2
    assert main([*args, "--out", str(tmp_path / "b")]) == 0      # the replay cache answers every call now
    assert len(_lines(path)) == len(calls)


def _replay_module():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).parents[2] / "benchmarks" / "replay.py"
    spec = importlib.util.spec_from_file_location("replay_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_streams_load_and_a_recorded_run_replays_to_the_same_replies(tmp_path, monkeypatch):
    import gzip

    from jitlab.llm import get_backbone
    replay = _replay_module()
    for name in replay.RECORDINGS:               # every committed stream parses, in per-thread start order
        threads = replay.load_stream(name, None)
        assert threads and all(c["op"] in ("chat", "score") for calls in threads.values() for c in calls)
        assert all([c["t0"] for c in calls] == sorted(c["t0"] for c in calls) for calls in threads.values())
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv(record.ENV, str(path))
    monkeypatch.setenv("JITLAB_HOME", str(tmp_path / "home"))
    assert main(["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first", "--limit", "2",
                 "--concurrency", "2", "--quiet", "--out", str(tmp_path / "a")]) == 0
    monkeypatch.delenv(record.ENV)
    monkeypatch.setattr(replay, "STREAMS", tmp_path)
    with gzip.open(tmp_path / "toy.jsonl.gz", "wt") as out:
        out.write(path.read_text())
    threads = replay.load_stream("toy", None)
    got = replay.replay(get_backbone("scripted:pick-first"), threads)
    n = sum(len(c) for c in threads.values())
    assert got["chat"] == n and replay.agreement(threads, got["replies"], lambda c: c["text"]) == (f"{n}/{n}", "0/0")
    assert len(got["busy"]) == os.cpu_count()
