"""A real OpenAI-compatible server for the tests: ``transformers serve`` on the embedded model, 127.0.0.1.

``real_server`` (session): the embedded SmolLM2-135M materialised once as a plain Hugging Face
folder in the shared test data dir (``.pytest_cache/jitlab_home/data/models``, about 25 s the first
time), served by ``jitlab.llm.serve.LocalServer`` for the whole session and stopped after it.

``proxy``: a RecordingProxy in front of it. It is NOT a double: every request goes to the real
server unchanged and its reply comes back unchanged; the proxy only keeps a copy of each exchange
(request body, Authorization header, status, the usage the server reported) for assertions.
"""
import json
import os
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


class RecordingProxy:
    """Forwards every HTTP request to ``upstream`` and records the exchange (see the module docstring)."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[dict] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def usages(self) -> list[dict]:
        return [e["response"]["usage"] for e in self.exchanges if e["status"] == 200]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
                forward = urllib.request.Request(proxy.upstream + self.path, data=data, headers=headers, method="POST")
                try:
                    with urllib.request.urlopen(forward, timeout=300) as reply:
                        status, body = reply.status, reply.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                except OSError:             # the server is gone: the client sees a dropped connection
                    self.close_connection = True
                    return
                try:
                    response = json.loads(body)
                except ValueError:
                    response = {"raw": body.decode(errors="replace")}
                proxy.exchanges.append({"path": self.path, "request": json.loads(data or b"{}"), "status": status,
                                        "authorization": self.headers.get("Authorization"), "response": response})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def shared_models_dir() -> Path:
    """Where tests keep the materialised model (the data dir every test's JITLAB_HOME links to)."""
    return Path(os.environ.get("JITLAB_TEST_DATA", REPO / ".pytest_cache" / "jitlab_home")) / "data" / "models"


@pytest.fixture(scope="session")
def served_model() -> Path:
    from jitlab.llm.serve import materialize_embedded
    return materialize_embedded(cache_dir=shared_models_dir())


@pytest.fixture(scope="module")  # not session: a live server child would trip other tests' leftover-process checks
def real_server(served_model, tmp_path_factory):
    from jitlab.llm.serve import LocalServer
    server = LocalServer(served_model, log=tmp_path_factory.mktemp("serve") / "serve.log").start()
    yield server
    server.stop()


@pytest.fixture
def proxy(real_server):
    recording = RecordingProxy(real_server.url)
    yield recording
    recording.close()
