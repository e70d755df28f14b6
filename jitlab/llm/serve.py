"""Serve a local model over an OpenAI-compatible HTTP API (``transformers serve``), e.g. the embedded one.

    python -m jitlab.llm.serve --port 8000       # materialise the embedded model, serve it, print the jitlab flags

    from jitlab.llm.serve import LocalServer, materialize_embedded
    folder = materialize_embedded()              # plain Hugging Face folder of SmolLM2-135M (cached)
    with LocalServer(folder) as server:          # `transformers serve <folder>` on 127.0.0.1, a free port
        llm = get_backbone(server.backbone, api_base=server.api_base)

How: ``transformers serve`` 5.x cannot load the embedded GGUF itself (it reads ``config.architectures``,
which a GGUF-derived config lacks), so :func:`materialize_gguf` (jitlab.llm.hf.load, the converter the hf
backbone loads GGUF through too) loads the GGUF with ``gguf_file=``
(de-quantizing it to float32), copies the weights into a fresh ``LlamaForCausalLM`` built from a
config without the GGUF quantization entry, and saves it with its tokenizer and chat template. The
folder is cached under ``JITLAB_HOME/data/models/`` (about 540 MB; written atomically, keyed by the
GGUF file and the transformers version) and is also loadable as ``hf:<folder>``.

The server is pinned to the folder (``transformers serve <folder>``): it loads the model before it
answers ``/health``, and the model name in a request must be the folder path exactly, so the
backbone is ``litellm:openai/<folder>`` (litellm strips ``openai/``). Any other name is an HTTP 400.
It runs offline (``HF_HUB_OFFLINE=1``): nothing is downloaded. Needs ``transformers[serving]``
(FastAPI, Uvicorn), in jitlab's ``dev`` extra.

Caveats: float32 on CPU (the same weights and dtype as ``--backbone embedded``, but another engine:
no cross-thread batching, and its own chat-template call, so replies and token counts can differ
slightly). ``transformers serve`` generates one request at a time without ``--continuous-batching``.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from jitlab.errors import ConfigError, InfraError
from jitlab.llm.hf.load import materialize_gguf
from jitlab.llm.hf.packaged import embedded_gguf_path
from jitlab.plumbing import free_port

__all__ = ["LocalServer", "materialize_embedded", "materialize_gguf", "serve_command"]


def materialize_embedded(target: str | Path | None = None, cache_dir: str | Path | None = None) -> Path:
    """The embedded SmolLM2-135M-Instruct as a plain Hugging Face folder (see :func:`materialize_gguf`)."""
    return materialize_gguf(embedded_gguf_path(), target, cache_dir)


def serve_command(folder: str | Path, host: str = "127.0.0.1", port: int = 8000, device: str = "cpu") -> list[str]:
    """argv of ``transformers serve`` pinned to ``folder`` (run with the current Python)."""
    code = "from transformers.cli.transformers import main; main()"
    return [sys.executable, "-c", code, "serve", str(folder), "--host", host, "--port", str(port),
            "--device", device, "--dtype", "float32"]


class LocalServer:
    """``transformers serve`` on ``folder`` in a child process (own process group), started and
    waited for on ``start()`` / ``with``; ``stop()`` ends it, ``kill()`` SIGKILLs it (a crash)."""

    def __init__(self, folder: str | Path, host: str = "127.0.0.1", port: int | None = None, device: str = "cpu",
                 start_timeout_s: float = 300.0, log: str | Path | None = None):
        self.folder = Path(folder).resolve()
        if not (self.folder / "config.json").is_file():
            raise ConfigError(f"{self.folder} is not a Hugging Face model folder (no config.json); "
                              "make one with jitlab.llm.serve.materialize_gguf")
        self.host, self.port, self.device = host, port or free_port(host), device
        self.start_timeout_s, self.log = start_timeout_s, Path(log) if log else None
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def model(self) -> str:
        """The model name requests must carry (the server is pinned to the folder)."""
        return str(self.folder)

    @property
    def backbone(self) -> str:
        return f"litellm:openai/{self.model}"

    def start(self) -> LocalServer:
        try:
            import fastapi  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError as exc:
            raise ConfigError("transformers serve needs FastAPI and Uvicorn: pip install 'transformers[serving]' "
                              "(or jitlab's dev extra)") from exc
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")    # see jitlab.llm.hf: spinning threads starve a shared CPU
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 (closed with the child)
        self.process = subprocess.Popen(serve_command(self.folder, self.host, self.port, self.device), env=env,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        if self.log:
            out.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise InfraError(f"transformers serve exited with code {self.process.returncode} while starting"
                                 + (f"; see {self.log}" if self.log else "; pass log= to see why"))
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if json.loads(response.read()).get("status") == "ok":
                        return self
            except (OSError, ValueError):   # not listening yet
                pass
            time.sleep(0.5)
        self.stop()
        raise InfraError(f"transformers serve did not answer {self.url}/health within {self.start_timeout_s:.0f}s")

    def _signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL the server (what a crash looks like to clients)."""
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def stop(self) -> None:
        self._signal(signal.SIGTERM)
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jitlab.llm.serve",
                                     description="Serve the embedded model (or a GGUF file) with transformers serve.")
    parser.add_argument("--gguf", help="a Llama-family GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        folder = materialize_gguf(args.gguf) if args.gguf else materialize_embedded()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"serving {folder} on http://{args.host}:{args.port}/v1; use it with\n"
          f"  jitlab run --suite textworld --backbone litellm:openai/{folder} --api-base http://{args.host}:{args.port}/v1",
          flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    command = serve_command(folder, args.host, args.port, args.device)
    os.execve(command[0], command, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
