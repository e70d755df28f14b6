"""Failure packets: deterministic, built from real run records (a toy run with a scripted test double)."""
import shutil

from jitlab.cli import main
from jitlab.engineer.packets import build_packet, packet_json, step_marks
from jitlab.runner import RunConfig, run


def _toy_run(path, backbone="scripted:pick-first", limit=3):
    return run(RunConfig(suite="toy", harness="react", backbone=backbone, limit=limit, out=str(path), quiet=True))


def test_same_records_give_a_byte_identical_packet(tmp_path):
    out = _toy_run(tmp_path / "a")
    first = packet_json(build_packet(out))
    copy = tmp_path / "elsewhere"
    shutil.copytree(out, copy)
    assert packet_json(build_packet(out)) == first
    assert packet_json(build_packet(copy)) == first  # no path, time or row id in it
    assert str(tmp_path) not in first


def test_packet_holds_constraints_failures_and_counts(tmp_path):
    packet = build_packet(_toy_run(tmp_path / "a"))
    assert packet["batch"] == {"episodes": 3, "successes": 0, "success_rate": 0.0,
                               "task_ids": ["toy-dev-0", "toy-dev-1", "toy-dev-2"]}
    assert set(packet["tasks"]) == {"toy-dev-0", "toy-dev-1", "toy-dev-2"}
    assert packet["tasks"]["toy-dev-0"]["tools"][0]["name"] == "act"
    assert "plan" not in packet_json(packet)  # TaskSpec.data (the answer) never enters a packet
    assert len(packet["failures"]) == 3
    # pick-first repeats 'go east', which the toy game refuses unless it is the next step of the plan
    assert packet["failure_counts"]["repeated_action"] >= 1 and packet["failure_counts"]["step_budget_end"] == 3
    excerpt = packet["failures"][0]["excerpt"]
    assert 0 < len(excerpt) <= 10 and all({"step", "action", "observation", "marks"} <= set(s) for s in excerpt)


def test_successful_episodes_are_not_failures(tmp_path):
    packet = build_packet(_toy_run(tmp_path / "h", backbone="scripted:pick-hash", limit=10))
    failed = {f["task_id"] for f in packet["failures"]}
    assert packet["batch"]["successes"] > 0  # pick-hash wins some toy tasks
    assert len(failed) == packet["batch"]["episodes"] - packet["batch"]["successes"]


def test_step_marks():
    steps = [{"tool": "act", "args": {"command": "go east"}, "observation": "Nothing happens.", "reward": 0.0},
             {"tool": "act", "args": {"command": "go east"}, "observation": "Nothing happens.", "reward": 0.0},
             {"tool": "act", "args": {"command": "open door"}, "observation": "You open the door.", "reward": 0.5}]
    assert step_marks(steps) == [["refused"], ["refused", "repeated_action", "repeated_state"], []]


def test_cli_prints_the_packet(tmp_path, capsys):
    out = _toy_run(tmp_path / "a", limit=1)
    assert main(["engineer", "packet", str(out)]) == 0
    assert capsys.readouterr().out == packet_json(build_packet(out)) + "\n"
    assert main(["engineer", "packet", str(tmp_path / "nothing")]) == 2
    assert "holds no run.sqlite" in capsys.readouterr().err
