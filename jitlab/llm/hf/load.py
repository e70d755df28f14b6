"""Loading a local transformers checkpoint: a folder, a GGUF file in it (de-quantized to float; the first load saves
a plain checkpoint under ``JITLAB_HOME/data/models/`` through :func:`materialize_gguf`, which jitlab.llm.serve
serves too, so later processes load in seconds), or a peft adapter merged
into its base (jitlab.llm.adapters). ``load_base`` is also the training side's loader.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.llm.adapters import load_adapter, trainable
from jitlab.llm.hf.packaged import embedded_gguf_path, gemma_gguf_path
from jitlab.paths import data_dir

log = logging.getLogger("jitlab.llm.hf")


def _parse_spec(spec: str) -> tuple[Path, str | None]:
    directory, _, gguf_file = spec.partition("#")
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise ConfigError(f"hf backbone: {directory!r} is not a local directory; use hf:<local dir>[#file.gguf] "
                          "(models are never downloaded; fetch them first, e.g. `huggingface-cli download`)")
    if gguf_file and not (path / gguf_file).is_file():
        found = sorted(p.name for p in path.glob("*.gguf"))
        raise ConfigError(f"hf backbone: no file {gguf_file!r} in {path}; GGUF files there: {', '.join(found) or '(none)'}")
    return path.resolve(), gguf_file or None


def gguf_folder(gguf: Path, cache_dir: Path | None = None) -> Path:
    """Where :func:`materialize_gguf` keeps the plain checkpoint of ``gguf``: under ``cache_dir`` (default
    ``JITLAB_HOME/data/models``), keyed by the file (path, size, mtime) and the transformers version."""
    import transformers
    stat = gguf.stat()
    key = f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}|llama-hf"
    root = Path(cache_dir) if cache_dir is not None else data_dir("models")
    return root / f"{gguf.stem}-hf-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def materialize_gguf(gguf: str | Path, target: str | Path | None = None, cache_dir: str | Path | None = None) -> Path:
    """A plain Hugging Face folder (config.json with ``architectures``, safetensors, tokenizer) of a
    Llama-family GGUF file, de-quantized to float32. Written once to ``target`` (default: a folder
    under ``cache_dir`` or ``JITLAB_HOME/data/models`` keyed by the file); later calls return it.
    The one GGUF-to-checkpoint converter: the hf backbone loads GGUF through it, jitlab.llm.serve serves it."""
    gguf = Path(gguf).expanduser()
    if not gguf.is_file():
        raise ConfigError(f"no GGUF file {gguf}; pass the path of a .gguf file")
    folder = Path(target) if target is not None else gguf_folder(gguf, Path(cache_dir) if cache_dir else None)
    if (folder / "DONE").is_file():
        return folder
    try:
        _convert(gguf, folder)
    except OSError as exc:
        if (folder / "DONE").is_file():    # another process finished first: its copy is as good
            return folder
        raise ConfigError(f"could not write the model folder {folder}: {exc}; free space or pass target=") from exc
    return folder


def _convert(gguf: Path, folder: Path) -> None:
    """Load ``gguf`` de-quantized, rebuild it without the GGUF "quantization" (so it saves and reloads as plain
    floats) and write it to ``folder`` atomically (tmp dir + rename); OSError when it cannot be written."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True,
                                                      dtype="float32")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"could not load {gguf} as a causal LM (needs the `gguf` and `accelerate` packages): "
                          f"{exc}") from exc
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)
    settings["architectures"] = [type(loaded).__name__]
    model = type(loaded)(AutoConfig.for_model(**settings))
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}.{threading.get_ident()}")
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "DONE").write_text(f"materialised by jitlab.llm.hf.load from {gguf}\n")
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load(directory: Path, gguf_file: str | None, device: str, dtype, convert: bool):
    """Load tokenizer + model from local files (GGUF through a converted copy when allowed).
    Returns (tokenizer, model, converted checkpoint dir or None)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if (directory / "adapter_config.json").is_file():  # a peft LoRA adapter: its base + the adapter, merged
        tokenizer, model = load_adapter(directory, load_base, dtype)
        return tokenizer, model.to(device).eval(), None
    source, extra, converted = directory, {}, None
    if gguf_file and convert:
        converted = gguf_folder(directory / gguf_file)
        if not (converted / "DONE").is_file():
            try:
                _convert(directory / gguf_file, converted)
            except OSError as exc:  # not written (full disk, read-only home): load the GGUF itself, only slower
                if not (converted / "DONE").is_file():
                    log.warning("could not save the converted GGUF checkpoint to %s (%s); next load converts again",
                                converted, exc)
                    converted = None
        source = converted or directory
    if converted is None and gguf_file:
        extra = {"gguf_file": gguf_file}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **extra)
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=dtype, **extra)
    except (OSError, ValueError) as exc:
        hint = " (GGUF loading needs the `gguf` and `accelerate` packages)" if gguf_file else ""
        raise ConfigError(f"could not load a causal LM from {source}{'#' + gguf_file if extra else ''}: {exc}{hint}") from exc
    return tokenizer, model.to(device).eval(), converted


def load_base(spec: str, dtype=None):
    """(tokenizer, model) on the CPU for a backbone spec ``embedded``, ``gemma3-270m`` or ``hf:<dir>[#file.gguf]`` (or a plain local
    directory), in float32 unless ``dtype`` is given; GGUF goes through jitlab's converted checkpoint."""
    import torch

    if spec in ("embedded", "gemma3-270m"):
        path = embedded_gguf_path() if spec == "embedded" else gemma_gguf_path()
        directory, gguf = path.parent, path.name
    else:
        directory, gguf = _parse_spec(spec.removeprefix("hf:"))
    tokenizer, model, _ = _load(directory, gguf, "cpu", dtype or torch.float32, True)
    return tokenizer, trainable(model)
