"""Loading a local transformers checkpoint: a folder, a GGUF file in it (de-quantized to float; the first load saves
a plain checkpoint under ``JITLAB_HOME/data/models/`` so later processes load in seconds), or a peft adapter merged
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
from jitlab.llm.hf.packaged import embedded_gguf_path, gemma_gguf_path

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


def _converted_dir(directory: Path, gguf_file: str) -> Path:
    import transformers

    from jitlab.paths import data_dir
    stat = (directory / gguf_file).stat()
    key = f"{directory / gguf_file}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}"
    return data_dir("models") / f"{Path(gguf_file).stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _load(directory: Path, gguf_file: str | None, device: str, dtype, convert: bool):
    """Load tokenizer + model from local files (GGUF through a converted copy when allowed).
    Returns (tokenizer, model, converted checkpoint dir or None)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if (directory / "adapter_config.json").is_file():  # a peft LoRA adapter: its base + the adapter, merged
        from jitlab.llm.adapters import load_adapter
        tokenizer, model = load_adapter(directory, load_base, dtype)
        return tokenizer, model.to(device).eval(), None
    source, extra = directory, {}
    converted = _converted_dir(directory, gguf_file) if gguf_file and convert else None
    if converted is not None and (converted / "DONE").is_file():
        source = converted
    elif gguf_file:
        extra = {"gguf_file": gguf_file}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **extra)
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=dtype, **extra)
    except (OSError, ValueError) as exc:
        hint = " (GGUF loading needs the `gguf` and `accelerate` packages)" if gguf_file else ""
        raise ConfigError(f"could not load a causal LM from {source}{'#' + gguf_file if extra else ''}: {exc}{hint}") from exc
    if converted is not None and source is directory:
        _save_converted(tokenizer, model, converted)
    if converted is not None and not (converted / "DONE").is_file():
        converted = None
    return tokenizer, model.to(device).eval(), converted


def _save_converted(tokenizer, model, target: Path) -> None:
    """Write the de-quantized checkpoint atomically (tmp dir + rename); failure only costs speed."""
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}.{threading.get_ident()}")
    try:
        tokenizer.save_pretrained(tmp)
        # the weights are already de-quantized floats; the gguf "quantizer" only blocks saving
        quantizer, model.hf_quantizer = getattr(model, "hf_quantizer", None), None
        quant_config = model.config.__dict__.pop("quantization_config", None)
        try:
            model.save_pretrained(tmp)
        finally:
            model.hf_quantizer = quantizer
            if quant_config is not None:
                model.config.quantization_config = quant_config
        (tmp / "DONE").write_text("converted by jitlab.llm.hf\n")
        os.replace(tmp, target) if not target.exists() else shutil.rmtree(tmp)
    except (OSError, ValueError) as exc:
        log.warning("could not save converted GGUF checkpoint to %s (%s); next load converts again", target, exc)
        shutil.rmtree(tmp, ignore_errors=True)


def load_base(spec: str, dtype=None):
    """(tokenizer, model) on the CPU for a backbone spec ``embedded``, ``gemma3-270m`` or ``hf:<dir>[#file.gguf]`` (or a plain local
    directory), in float32 unless ``dtype`` is given; GGUF goes through jitlab's converted checkpoint."""
    import torch

    from jitlab.llm.adapters import trainable
    if spec in ("embedded", "gemma3-270m"):
        path = embedded_gguf_path() if spec == "embedded" else gemma_gguf_path()
        directory, gguf = path.parent, path.name
    else:
        directory, gguf = _parse_spec(spec.removeprefix("hf:"))
    tokenizer, model, _ = _load(directory, gguf, "cpu", dtype or torch.float32, True)
    return tokenizer, trainable(model)
