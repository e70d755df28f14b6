"""Adversarial harnesses, one per isolation property. Each test checks the host afterwards (no file
written or deleted, no connection, no surviving process, nothing leaked into the records) and
the diagnostic the failure became. Limits are small (5 s wall, 1 s CPU, 512 MiB) to stay fast."""
import os
import socket
import time
import uuid

import pytest
from sandbox_helpers import action, descendants, episode, requires_bwrap, small_config, write_harness

from jitlab.sandbox import UNISOLATED, validate

pytestmark = requires_bwrap


def attack(tmp_path, body, top="", config=None, **files):
    folder = write_harness(tmp_path / "cand", action_py=action(body, top), **files)
    start = time.monotonic()
    result, agent, records, llm = episode(folder, config or small_config())
    return result, agent, records, time.monotonic() - start


def assert_failed(result, agent, kind, file="action.py"):
    assert result.status == "harness_error", result
    assert agent.diagnostic is not None and agent.diagnostic.kind == kind, agent.diagnostic
    assert result.diagnostic["kind"] == kind
    if file:
        assert agent.diagnostic.file == file, agent.diagnostic


@pytest.mark.parametrize("what", ["write_host", "delete_host", "write_candidate", "delete_candidate", "fill_tmp"])
def test_files_outside_the_sandbox_cannot_be_written_or_deleted(tmp_path, what):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "pwned.txt"
    here = "__import__('os').path.dirname(__file__)"
    body = {"write_host": f"open({str(target)!r}, 'w').write('pwned')",
            "delete_host": f"__import__('os').remove({str(victim)!r})",
            "write_candidate": f"open({here} + '/pwned.txt', 'w').write('pwned')",
            "delete_candidate": f"__import__('os').remove({here} + '/memory.py')",
            "fill_tmp": "open('/tmp/fill', 'wb').write(bytes(64 << 20))"}[what]
    result, agent, _, _ = attack(tmp_path, body)
    assert_failed(result, agent, "runtime_error")
    assert agent.diagnostic.line is not None and "Error" in agent.diagnostic.message
    assert victim.read_text() == "keep me" and not target.exists()
    assert not (tmp_path / "cand" / "pwned.txt").exists() and (tmp_path / "cand" / "memory.py").exists()


def test_sandbox_tmp_is_private(tmp_path):
    name = f"jitlab-sandbox-probe-{uuid.uuid4().hex}"
    body = f"open('/tmp/{name}', 'w').write('x')\nreturn Decision('act', {{'command': 'look'}}, thought='wrote')"
    result, agent, records, _ = attack(tmp_path, body)
    assert result.status == "ok" and records[0]["thought"] == "wrote"
    assert not os.path.exists(f"/tmp/{name}")


def test_secret_file_and_environment_variable_stay_secret(tmp_path, monkeypatch):
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    monkeypatch.setenv("JITLAB_TEST_SECRET", secret)
    (tmp_path / "secret.txt").write_text(secret)
    paths = [str(tmp_path / "secret.txt"), "/proc/1/environ", "/proc/2/environ", "/proc/self/environ",
             f"/proc/{os.getpid()}/environ", "/root/.bash_history", "/etc/shadow", "/etc/passwd"]
    body = f"""
import os
found = []
for path in {paths!r}:
    try:
        found.append(open(path, 'rb').read().decode('latin-1'))
    except OSError as exc:
        found.append(type(exc).__name__)
found.append(str(os.environ.get('JITLAB_TEST_SECRET')))
found.append(repr(dict(os.environ)))
found.append(repr(ctx.task.data))
return Decision('act', {{'command': 'look'}}, thought=' | '.join(found))
"""
    result, agent, records, _ = attack(tmp_path, body)
    assert result.status == "ok", result
    thought = records[0]["thought"]
    assert secret not in thought and secret not in repr(result.as_dict())
    parts = thought.split(" | ")
    assert parts[0] == "FileNotFoundError"                         # the host file is not there
    assert parts[-3] == "None" and parts[-1] == "{}"               # no env var, no task data


@pytest.mark.parametrize("how", ["python", "ctypes"])
def test_no_socket_to_localhost(tmp_path, how):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.3)
    port = server.getsockname()[1]
    body = {"python": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)",
            "ctypes": "import ctypes\nctypes.CDLL(None).socket(2, 1, 0)"}[how]
    result, agent, _, _ = attack(tmp_path, body)
    assert_failed(result, agent, "sandbox_violation", file="action.py" if how == "python" else None)
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()


@pytest.mark.parametrize("how", ["subprocess", "os.system", "os.exec", "ctypes.system", "ctypes.fork"])
@pytest.mark.parametrize("mode", ["bwrap", "unisolated"])
def test_no_new_process(tmp_path, how, mode):
    marker = tmp_path / "spawned"
    body = {"subprocess": f"import subprocess\nsubprocess.run(['touch', {str(marker)!r}])",
            "os.system": f"import os\nos.system('touch {marker}')",
            "os.exec": f"import os\nos.execv('/usr/bin/touch', ['touch', {str(marker)!r}])",
            "ctypes.system": f"import ctypes\nctypes.CDLL(None).system(b'touch {marker}')",
            "ctypes.fork": f"import ctypes\nif ctypes.CDLL(None).fork() == 0:\n    open({str(marker)!r}, 'w')"}[how]
    config = small_config(bwrap="/nonexistent/bwrap", allow_unisolated=True) if mode == "unisolated" else None
    if mode == "unisolated":
        with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
            result, agent, _, _ = attack(tmp_path, body, config=config)
        assert agent.isolation == UNISOLATED   # the host path IS visible here: seccomp alone must stop it
    else:
        result, agent, _, _ = attack(tmp_path, body)
    assert_failed(result, agent, "sandbox_violation", file=None)
    time.sleep(0.2)
    assert not marker.exists()


@pytest.mark.parametrize("how", ["os.fork", "ctypes.fork"])
def test_fork_bomb(tmp_path, how):
    body = {"os.fork": "import os\nwhile True:\n    os.fork()",
            "ctypes.fork": "import ctypes\nlibc = ctypes.CDLL(None)\nwhile True:\n    libc.fork()"}[how]
    result, agent, _, _ = attack(tmp_path, body)
    assert_failed(result, agent, "sandbox_violation", file="action.py" if how == "os.fork" else None)
    assert descendants() == []


def test_memory_exhaustion(tmp_path):
    body = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))"
    # cpu_s and wall_s above small_config's: the child's start-up (imports) plus zeroing 256 MB went past 1 CPU-second
    # on a loaded machine, so the CPU limit tripped first (seen in a full run)
    result, agent, _, _ = attack(tmp_path, body, config=small_config(memory_mb=256, cpu_s=10, wall_s=30.0))
    assert_failed(result, agent, "memory_limit")


@pytest.mark.parametrize("how", ["plain", "sigxcpu_blocked", "sigxcpu_ignored"])
def test_busy_loop_hits_the_cpu_limit(tmp_path, how):
    prelude = {"plain": "",
               "sigxcpu_blocked": "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGXCPU})\n",
               "sigxcpu_ignored": "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"}[how]
    result, agent, _, elapsed = attack(tmp_path, prelude + "while True:\n    pass",
                                       config=small_config(wall_s=30.0, cpu_s=1))
    # ignoring SIGXCPU means touching its handler, which the filter treats as a violation
    assert_failed(result, agent, "sandbox_violation" if how == "sigxcpu_ignored" else "timeout_cpu", file=None)
    assert elapsed < 30  # ended by the CPU limit, not the (generous, load-proof) wall limit


@pytest.mark.parametrize("how", ["sleep", "setsid_then_sleep"])
def test_sleeping_forever_hits_the_wall_limit(tmp_path, how):
    prelude = "import os\nos.setsid()\n" if how == "setsid_then_sleep" else ""
    result, agent, _, elapsed = attack(tmp_path, prelude + "import time\ntime.sleep(10 ** 6)",
                                       config=small_config(wall_s=1.0))
    assert_failed(result, agent, "timeout_wall", file=None)
    assert elapsed < 1.0 + 10 and descendants() == []  # slack for start-up on a loaded machine


def test_huge_print_hits_the_output_limit(tmp_path):
    result, agent, _, _ = attack(tmp_path, "print('x' * 200_000_000)", config=small_config(cpu_s=10, wall_s=30.0))
    assert_failed(result, agent, "output_limit", file=None)


def test_setsid_daemon(tmp_path):
    marker = tmp_path / "daemon-alive"
    body = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            open({str(marker)!r}, 'w').write(str(time.time()))
            time.sleep(0.05)
return Decision('act', {{'command': 'look'}})
"""
    result, agent, _, _ = attack(tmp_path, body)
    assert_failed(result, agent, "sandbox_violation")
    time.sleep(0.3)
    assert not marker.exists() and descendants() == []


def test_os_exit_at_import(tmp_path):
    from sandbox_helpers import MEMORY
    folder = write_harness(tmp_path / "cand", memory_py="import os\nos._exit(3)\n" + MEMORY)
    checked = validate(folder, small_config())
    assert not checked.ok and checked.diagnostic.kind == "crash"
    assert checked.diagnostic.file == "memory.py" and checked.diagnostic.phase == "load"
    assert "status 3" in checked.diagnostic.message
    result, agent, _, _ = episode(folder, small_config())
    assert_failed(result, agent, "crash", file="memory.py")


ALWAYS_EQUAL = """
class AlwaysEqual:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
"""
FIND_CHANNEL = "import gc\nchannel = next(o for o in gc.get_objects() if type(o).__name__ == '_Channel')\n"


@pytest.mark.parametrize("how,kind", [
    ("tool", "protocol_error"), ("args", "protocol_error"), ("object", "interface_mismatch"),
    ("forged_types", "protocol_error"), ("wrong_nonce", "protocol_error"), ("duplicate_keys", "protocol_error")])
def test_result_that_equals_everything_is_rejected(tmp_path, how, kind):
    body = {"tool": "return Decision(AlwaysEqual(), {'command': 'look'})",
            "args": "return Decision('act', {'command': AlwaysEqual()})",
            "object": "return AlwaysEqual()",
            # a harness can find the RPC channel in its own memory; the parent still checks exact types
            "forged_types": FIND_CHANNEL + "channel.send('done', result={'tool': 1, 'args': {}, 'thought': '', "
                                           "'data': {}})\nreturn Decision('act', {'command': 'look'})",
            "wrong_nonce": FIND_CHANNEL + "import os\nos.write(channel.fd_out, b'{\"nonce\":\"x\",\"op\":\"done\","
                                          "\"result\":null}\\n')\nreturn Decision('act', {'command': 'look'})",
            "duplicate_keys": FIND_CHANNEL + "import os\nos.write(channel.fd_out, ('{\"nonce\":\"%s\",\"op\":\"done\","
                                             "\"op\":\"done\",\"result\":null}\\n' % channel.nonce).encode())\n"
                                             "return Decision('act', {'command': 'look'})"}[how]
    result, agent, records, _ = attack(tmp_path, body, top=ALWAYS_EQUAL)
    assert_failed(result, agent, kind, file="action.py" if how in ("tool", "args", "object") else None)
    assert records == [] and not result.success


def test_forged_success_on_stdout_is_ignored(tmp_path):
    body = FIND_CHANNEL + """
import os, sys
forged = ('{"nonce": "%s", "op": "done", "result": {"tool": "act", "args": {"command": "take coin"}, '
          '"thought": "", "data": {}}}')
print(forged % channel.nonce)
print('SUCCESS success=True reward=1.0')
os.write(1, b'{"success": true, "reward": 1.0, "status": "ok"}\\n')
sys.__stdout__.write('{"op": "done", "success": true}\\n')
return Decision('act', {'command': 'look'}, thought='honest')
"""
    result, agent, records, _ = attack(tmp_path, body)
    assert result.status == "ok" and not result.success and result.reward == 0.0
    assert records and all(r["args"] == {"command": "look"} and r["thought"] == "honest" for r in records)


def test_scorer_bank_and_runs_are_out_of_reach(tmp_path):
    secret = f"answer-{uuid.uuid4().hex}"
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "summary.json").write_text(secret)
    bank = tmp_path / "bank.sqlite"
    bank.write_text(secret)
    home = os.environ["JITLAB_HOME"]
    (tmp_path / "jitlab_home" / "replay.sqlite").write_text(secret)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    body = f"""
import os, importlib
here = os.path.dirname(__file__)
found = []
for path in [here + '/../runs/summary.json', here + '/../../runs/summary.json', {str(bank)!r},
             {home!r} + '/replay.sqlite', {repo!r} + '/jitlab/envs/toy.py', {repo!r} + '/seed_bank/react/action.py']:
    try:
        found.append(open(path).read())
    except OSError as exc:
        found.append(type(exc).__name__)
for module in ['jitlab.envs.toy', 'jitlab.envs.dbbench', 'jitlab.envs.textworld']:
    try:
        importlib.import_module(module)
        found.append('imported ' + module)
    except ImportError as exc:
        found.append(type(exc).__name__)
found.append(repr(sorted(os.listdir({repo!r} + '/jitlab/envs'))))
found.append(repr(sorted(os.listdir({repo!r}))))
found.append(repr(ctx.task.data))
return Decision('act', {{'command': 'look'}}, thought=' | '.join(found))
"""
    result, agent, records, _ = attack(tmp_path, body)
    assert result.status == "ok", result
    parts = records[0]["thought"].split(" | ")
    assert parts[:6] == ["FileNotFoundError"] * 6
    assert parts[6:9] == ["ModuleNotFoundError"] * 3
    assert parts[9] == "['__init__.py', 'base.py']" and parts[11] == "{}"
    assert "runs" not in parts[10] and "seed_bank" not in parts[10] and "jitlab" in parts[10]
    assert secret not in records[0]["thought"]


def test_importing_suite_code_at_import_time_is_an_import_error(tmp_path):
    from sandbox_helpers import MEMORY
    folder = write_harness(tmp_path / "cand", memory_py="from jitlab.envs.toy import ToySuite\n" + MEMORY)
    checked = validate(folder, small_config())
    assert not checked.ok and checked.diagnostic.kind == "import_error" and checked.diagnostic.file == "memory.py"
