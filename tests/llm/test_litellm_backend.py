"""litellm backbone against a local OpenAI-compatible HTTP server started by the test (127.0.0.1).

The server is a stub: it replies from a script of (status, text) pairs and records the requests,
so retries, failures, token usage and pricing are checked over real HTTP through litellm.
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jitlab.errors import ConfigError, InfraError
from jitlab.llm import get_backbone
from jitlab.llm.litellm_backend import LiteLLMBackbone


class _Stub:
    def __init__(self, script):
        self.script, self.requests = list(script), []

    def handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "body": body})
                status, text = stub.script.pop(0) if len(stub.script) > 1 else stub.script[0]
                if status == 200:
                    payload = {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}],
                               "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}}
                else:
                    payload = {"error": {"message": text, "type": "server_error", "code": status}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@pytest.fixture
def server():
    servers = []

    def start(script):
        stub = _Stub(script)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), stub.handler())
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return stub, f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]


def test_success_usage_and_pricing_yaml(server, tmp_path):
    stub, base = server([(200, "hi there")])
    prices = tmp_path / "prices.yaml"
    prices.write_text("litellm:openai/local-model: {input_per_mtok: 2.0, output_per_mtok: 10.0}\n")
    llm = get_backbone("litellm:openai/local-model", api_base=base, api_key="none", pricing=str(prices))
    reply = llm.chat(MESSAGES, max_tokens=16)
    assert reply.text == "hi there"
    assert (reply.prompt_tokens, reply.completion_tokens) == (120, 30)
    assert reply.cost == pytest.approx((120 * 2.0 + 30 * 10.0) / 1e6)
    assert reply.latency_s > 0 and not reply.cached
    assert llm.id == f"litellm:openai/local-model@{base}"
    assert len(stub.requests) == 1
    sent = stub.requests[0]
    assert sent["path"].endswith("/chat/completions")
    assert sent["body"]["messages"] == MESSAGES and sent["body"]["max_tokens"] == 16


def test_bare_model_key_in_pricing_dict(server):
    _, base = server([(200, "ok")])
    llm = LiteLLMBackbone("openai/local-model", api_base=base, api_key="none",
                          pricing={"openai/local-model": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}})
    assert llm.chat(MESSAGES).cost == pytest.approx(150 / 1e6)


def test_unpriced_self_hosted_model_costs_zero(server):
    _, base = server([(200, "ok")])
    llm = LiteLLMBackbone("openai/some-self-hosted-model", api_base=base, api_key="none")
    assert llm.chat(MESSAGES).cost == 0.0


def test_500_then_success_is_retried(server):
    stub, base = server([(500, "overloaded"), (200, "recovered")])
    llm = LiteLLMBackbone("openai/local-model", api_base=base, api_key="none", retries=3, backoff_s=0.01)
    assert llm.chat(MESSAGES).text == "recovered"
    assert len(stub.requests) == 2       # one failure, one success: litellm/openai add no hidden retries


def test_permanent_failure_raises_infra_error(server):
    stub, base = server([(503, "down")])
    llm = LiteLLMBackbone("openai/local-model", api_base=base, api_key="none", retries=2, backoff_s=0.01)
    with pytest.raises(InfraError, match="failed 3 times"):
        llm.chat(MESSAGES)
    assert len(stub.requests) == 3


def test_unreachable_server_is_infra_error():
    llm = LiteLLMBackbone("openai/local-model", api_base="http://127.0.0.1:9/v1", api_key="none",
                          retries=1, backoff_s=0.01, timeout=5)
    with pytest.raises(InfraError):
        llm.chat(MESSAGES)


def test_rejected_request_is_not_retried(server):
    stub, base = server([(401, "bad key")])
    llm = LiteLLMBackbone("openai/local-model", api_base=base, api_key="wrong", retries=3, backoff_s=0.01)
    with pytest.raises(ConfigError, match="not retried"):
        llm.chat(MESSAGES)
    assert len(stub.requests) == 1


def test_unknown_option_is_a_config_error():
    with pytest.raises(ConfigError, match="api_bse"):
        get_backbone("litellm:openai/x", api_bse="http://x")


def test_no_key_with_api_base_sends_a_placeholder(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub, base = server([(200, "ok")])
    assert LiteLLMBackbone("openai/local-model", api_base=base, retries=2).chat(MESSAGES).text == "ok"
    assert len(stub.requests) == 1


def test_a_server_that_wants_a_key_is_a_config_error(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub, base = server([(401, "invalid api key")])
    with pytest.raises(ConfigError, match="placeholder.*OPENAI_API_KEY"):
        LiteLLMBackbone("openai/local-model", api_base=base, retries=3, backoff_s=0.01).chat(MESSAGES)
    assert len(stub.requests) == 1


def test_no_key_and_no_api_base_is_a_config_error_not_retried(monkeypatch, caplog):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = LiteLLMBackbone("openai/gpt-4o-mini", retries=3, backoff_s=5)   # a retry would take 5 s
    with pytest.raises(ConfigError, match="no API key.*OPENAI_API_KEY"):
        llm.chat(MESSAGES)
    assert "attempt" not in caplog.text


def test_hf_parameters_are_translated_and_unknown_ones_refused(server):
    stub, base = server([(200, "ok")])
    llm = LiteLLMBackbone("openai/local-model", api_base=base, api_key="none")
    llm.chat(MESSAGES, max_new_tokens=7, repetition_penalty=1.1, do_sample=False, seed=3)
    body = stub.requests[0]["body"]
    assert body["max_tokens"] == 7 and body["temperature"] == 0 and body["seed"] == 3
    assert not {"max_new_tokens", "repetition_penalty", "do_sample"} & set(body)
    with pytest.raises(ConfigError, match="unknown chat parameter.*api_base"):
        llm.chat(MESSAGES, api_base="http://elsewhere")
    assert len(stub.requests) == 1


def test_a_reply_ends_before_its_stop_string(server):
    # transformers serve returns the stop string with the reply; OpenAI does not: the backbone cuts it
    _, base = server([(200, "Thought: go\nAction: look\nObservation: dark")])
    llm = LiteLLMBackbone("openai/local-model", api_base=base, api_key="none")
    assert llm.chat(MESSAGES, stop=["\nObservation"]).text == "Thought: go\nAction: look"
    assert llm.chat(MESSAGES, stop="\nAction").text == "Thought: go"
    assert llm.chat(MESSAGES).text.endswith("dark")
