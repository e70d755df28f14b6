"""The litellm backbone against a REAL OpenAI-compatible server: ``transformers serve`` on the embedded
model (fixtures in tests/llm/conftest.py), with no API key in the environment.

Each test keeps the server's work small (max_tokens of a few tokens, --max-steps 2): these are smoke
checks of the client, not measurements. The ReAct run on TextWorld, a sandboxed harness and a server
killed mid-run are ``slow`` except the first, which runs by default.
"""
import json
import shutil
import sqlite3
import threading
import time

import pytest

from jitlab.cli import main
from jitlab.errors import ConfigError
from jitlab.llm.litellm_backend import PLACEHOLDER_KEY, LiteLLMBackbone
from jitlab.llm.serve import LocalServer

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch):
    # a local server needs no key: none is set in any of these tests
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)


def _backbone(server, api_base, **options):
    return LiteLLMBackbone(f"openai/{server.model}", api_base=api_base, retries=1, backoff_s=0.01, **options)


def test_hf_parameters_are_translated_not_sent(real_server, proxy):
    # was: the body carried max_tokens AND max_new_tokens -> HTTP 422 "Unexpected fields" on the first call
    llm = _backbone(real_server, proxy.api_base, api_key="sk-local")      # a key: only case 1 is at stake
    reply = llm.chat(MESSAGES, max_new_tokens=5, stop=["\nObservation"], top_k=4, do_sample=False)
    assert len(proxy.exchanges) == 1
    sent = proxy.exchanges[0]["request"]
    assert sent["max_tokens"] == 5 and sent["temperature"] == 0 and sent["stop"] == ["\nObservation"]
    assert not {"max_new_tokens", "top_k", "do_sample"} & set(sent)
    usage = proxy.usages()[0]
    assert (reply.prompt_tokens, reply.completion_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert 0 < reply.completion_tokens <= 5 and reply.text


def test_no_api_key_sends_a_placeholder(real_server, proxy):
    # was: litellm's "Missing credentials", classified as a server error and retried; now a placeholder key
    reply = _backbone(real_server, proxy.api_base).chat(MESSAGES, max_tokens=2)
    assert reply.completion_tokens > 0
    assert [e["authorization"] for e in proxy.exchanges] == [f"Bearer {PLACEHOLDER_KEY}"]
    # a key that is set is sent as it is
    _backbone(real_server, proxy.api_base, api_key="sk-local").chat(MESSAGES, max_tokens=2)
    assert proxy.exchanges[-1]["authorization"] == "Bearer sk-local"


def test_a_4xx_is_a_config_error_with_the_servers_words(real_server, proxy):
    llm = LiteLLMBackbone("openai/no-such-model", api_base=proxy.api_base, api_key="sk-local", retries=3, backoff_s=0.01)
    with pytest.raises(ConfigError, match="pinned to") as err:   # the server's own explanation (HTTP 400)
        llm.chat(MESSAGES, max_tokens=2)
    assert "not retried" in str(err.value) and len(proxy.exchanges) == 1
    with pytest.raises(ConfigError, match="Unexpected fields"):   # HTTP 422 for a field the server does not know
        _backbone(real_server, proxy.api_base).chat(MESSAGES, max_tokens=2, extra_body={"no_such_field": 1})
    with pytest.raises(ConfigError, match="unknown chat parameter.*max_new_token"):  # caught before any request
        _backbone(real_server, proxy.api_base).chat(MESSAGES, max_new_token=2)
    assert len(proxy.exchanges) == 2


def test_a_wrong_model_name_stops_the_run_with_one_line(real_server, proxy, tmp_path, capsys):
    code = main(["run", "--suite", "toy", "--harness", "react", "--backbone", "litellm:openai/no-such-model",
                 "--api-base", proxy.api_base, "--limit", "2", "--no-cache", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "pinned to" in err and "Traceback" not in err
    assert len(proxy.exchanges) == 1                      # no retries, no second episode


def _episodes(out):
    with sqlite3.connect(out / "run.sqlite") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM episodes ORDER BY id")]


def _calls(out):
    with sqlite3.connect(out / "run.sqlite") as db:
        return db.execute("SELECT prompt_tokens, completion_tokens, cached FROM calls ORDER BY rowid").fetchall()


def test_react_on_textworld_records_the_servers_usage(real_server, proxy, tmp_path):
    out = tmp_path / "run"
    code = main(["run", "--suite", "textworld", "--harness", "react", "--backbone", f"litellm:openai/{real_server.model}",
                 "--api-base", proxy.api_base, "--limit", "1", "--max-steps", "1", "--no-cache", "--out", str(out)])
    assert code == 0
    [episode] = _episodes(out)
    assert episode["status"] in ("ok", "budget") and episode["steps"] == 1, episode
    usages = proxy.usages()
    assert usages and all(e["status"] == 200 for e in proxy.exchanges)
    assert not any("max_new_tokens" in e["request"] for e in proxy.exchanges)
    # every recorded call carries the tokens the server reported for it, and the episode their sum
    assert _calls(out) == [(u["prompt_tokens"], u["completion_tokens"], 0) for u in usages]
    assert episode["prompt_tokens"] == sum(u["prompt_tokens"] for u in usages)
    assert episode["completion_tokens"] == sum(u["completion_tokens"] for u in usages)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tokens_per_task"] == sum(u["total_tokens"] for u in usages)


@pytest.mark.slow
def test_a_sandboxed_harness_calls_the_server_through_the_parent(real_server, proxy, tmp_path):
    from jitlab.harness import load_harness
    from jitlab.sandbox import ISOLATED
    folder = tmp_path / "my_react"                       # not in the seed bank: sandboxed
    shutil.copytree(load_harness("react").folder, folder)
    out = tmp_path / "run"
    code = main(["run", "--suite", "textworld", "--harness", str(folder), "--isolation", "sandbox",
                 "--backbone", f"litellm:openai/{real_server.model}", "--api-base", proxy.api_base,
                 "--limit", "1", "--max-steps", "2", "--no-cache", "--out", str(out)])
    assert code == 0
    [episode] = _episodes(out)
    assert episode["status"] in ("ok", "budget") and episode["isolation"] == ISOLATED, episode
    usages = proxy.usages()
    assert len(usages) >= 2 and _calls(out) == [(u["prompt_tokens"], u["completion_tokens"], 0) for u in usages]


@pytest.mark.slow
def test_a_server_killed_mid_run_gives_infra_errors_retried_on_rerun(served_model, tmp_path):
    from jitlab.runner import RunConfig, run
    server = LocalServer(served_model, log=tmp_path / "serve.log").start()
    port = server.port
    out = tmp_path / "run"
    cfg = RunConfig(suite="textworld", harness="react", backbone=server.backbone, limit=2, max_steps=3, cache=False,
                    backbone_options={"api_base": server.api_base, "retries": 0}, retries=0, out=str(out), quiet=True)
    worker = threading.Thread(target=run, args=(cfg,), daemon=True)
    try:
        worker.start()
        deadline = time.monotonic() + 300
        while worker.is_alive() and time.monotonic() < deadline and not ((out / "run.sqlite").exists() and _calls(out)):
            time.sleep(0.2)
        assert _calls(out), "no call reached the server"
        server.kill()                                     # SIGKILL: a crash, mid-episode
        worker.join(300)
        assert not worker.is_alive()
    finally:
        server.kill()
    statuses = [e["status"] for e in _episodes(out)]
    assert "infra_error" in statuses and "harness_error" not in statuses, statuses
    # the server is back (same address): the rerun retries what infrastructure broke, and nothing else
    with LocalServer(served_model, port=port, log=tmp_path / "serve2.log"):
        run(cfg)
    final = {e["task_id"]: e["status"] for e in _episodes(out)}   # the last attempt of each task
    assert len(final) == 2 and set(final.values()) <= {"ok", "budget"}, final
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_episodes"] == 2


def test_the_materialised_model_is_a_plain_hugging_face_folder(served_model, tmp_path):
    from jitlab.llm.serve import materialize_gguf
    config = json.loads((served_model / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert {"model.safetensors", "tokenizer.json", "DONE"} <= {p.name for p in served_model.iterdir()}
    with pytest.raises(ConfigError, match="no GGUF file"):
        materialize_gguf(tmp_path / "missing.gguf")
    with pytest.raises(ConfigError, match="not a Hugging Face model folder"):
        LocalServer(tmp_path)
