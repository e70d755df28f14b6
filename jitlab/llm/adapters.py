"""peft LoRA adapters as backbones: ``hf:<adapter dir>`` loads the base model, merges the adapter(s), and chats.

    from jitlab.llm import get_backbone
    llm = get_backbone("hf:runs/train/stage1/adapter")     # a folder with adapter_config.json (peft)
    gen = get_generator("plan:hf:runs/train/stage1/adapter", handle)

Which base: ``jitlab_base.json`` in the adapter folder (written by :mod:`jitlab.train`) names it as a backbone spec,
``embedded`` or ``hf:<dir>[#file.gguf]`` (resolved on the machine that loads it, so a run folder moves between
machines), plus ``below``: earlier adapters (paths relative to this folder) merged into the base first. A stage
trained on top of a previous stage's merged policy records that chain, so its adapter alone is enough to load it.
Without that file, peft's ``base_model_name_or_path`` must be a local directory (nothing is downloaded).

The adapters are merged into the weights (``merge_and_unload``), so generation runs at the base model's speed.
``jitlab.llm.hf.load_base`` is also the training side's loader (jitlab.train): a model de-quantized from GGUF keeps a GGUF
"quantizer" that makes transformers and peft refuse to train it; ``trainable`` clears it (the weights are floats).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.plumbing import hash_file

__all__ = ["ADAPTER_CONFIG", "BASE_FILE", "adapter_chain", "ignore_peft_checkpointing_probe", "is_adapter_dir",
           "load_adapter", "trainable", "weights_sha", "weights_tag", "write_base"]

ADAPTER_CONFIG = "adapter_config.json"
BASE_FILE = "jitlab_base.json"


def ignore_peft_checkpointing_probe() -> None:
    """Silence transformers' ``FutureWarning: `is_gradient_checkpointing` is deprecated`` (that warning only).

    jitlab never reads that property: peft reads it whenever it wraps a model (``PeftModel.__init__``:
    ``getattr(model, "is_gradient_checkpointing", True)``, so every ``PeftModel.from_pretrained`` here and every
    TRL trainer given a ``peft_config``), and TRL reads it around GRPO's generation and DPO's reference pass. Seen
    with transformers 5.25, peft 0.21, TRL 1.16: the notebooks' executed copies (02-04) showed it in their training
    and evaluation cells. Nothing to fix on jitlab's side until peft and TRL read ``is_activation_checkpointing``;
    filtering by message, category and the module that warns leaves every other warning as it was."""
    import warnings
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning,
                            module="transformers.modeling_utils")


def is_adapter_dir(directory: str | Path) -> bool:
    return (Path(directory) / ADAPTER_CONFIG).is_file()


def write_base(directory: str | Path, base: str, below: list[str] | tuple = ()) -> None:
    """Record the base backbone spec and the earlier adapters (relative to ``directory``) an adapter sits on."""
    (Path(directory) / BASE_FILE).write_text(json.dumps({"base": base, "below": list(below)}, indent=1) + "\n")


def trainable(model):
    """Drop the GGUF quantizer and quantization_config a de-quantized model still carries (see module docstring)."""
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    if hasattr(model, "is_quantized"):
        model.is_quantized = False
    return model


def _base_of(directory: Path) -> tuple[str, list[Path]]:
    info_path = directory / BASE_FILE
    if info_path.is_file():
        try:
            info = json.loads(info_path.read_text())
            return str(info["base"]), [(directory / p).resolve() for p in info.get("below", [])]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{info_path} is not a jitlab adapter base record ({exc}); it needs "
                              '{"base": "embedded" | "hf:<dir>", "below": [...]}') from exc
    try:
        base = json.loads((directory / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path") or ""
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{directory / ADAPTER_CONFIG} does not parse ({exc})") from exc
    if not base or not Path(base).is_dir():
        raise ConfigError(f"adapter {directory}: base model {base!r} is not a local directory and the folder has no "
                          f"{BASE_FILE}; write one: {{\"base\": \"embedded\"}} or {{\"base\": \"hf:<dir>\"}}")
    return f"hf:{base}", []


def adapter_chain(directory: str | Path) -> tuple[str, list[Path]]:
    """(base spec, [the adapters below it..., the adapter itself]) as absolute paths: what a stage trained on top of
    this adapter records as its own ``below``."""
    directory = Path(directory).resolve()
    base, below = _base_of(directory)
    return base, [*below, directory]


def weights_sha(directory: str | Path) -> str:
    """sha256 (16 hex digits) of the weight files of every adapter in ``directory``'s chain, in order: a stage trained
    again into the same folder is another model, so the replay cache keys on this, not on the path alone
    (``weights_tag``)."""
    digest = hashlib.sha256()
    for adapter in adapter_chain(directory)[1]:
        for weights in sorted(adapter.glob("adapter_model.*")):
            digest.update(weights.name.encode())
            hash_file(weights, digest)
    return digest.hexdigest()[:16]


def weights_tag(directory: str | Path) -> str:
    """``@<weights_sha>`` for an adapter folder, '' for anything else: what a backbone's ``cache_id`` adds to its id
    (jitlab.llm.hf.HFBackbone, jitlab.llm.lazy.LazyBackbone)."""
    return f"@{weights_sha(directory)}" if is_adapter_dir(directory) else ""


def load_adapter(directory: str | Path, load_base, dtype=None):
    """(tokenizer, model) of an adapter folder: its base with every adapter below it and itself merged in.
    ``load_base(spec, dtype)`` loads the base (jitlab.llm.hf.load_base; passed in so this module never imports hf)."""
    from peft import PeftModel
    ignore_peft_checkpointing_probe()
    directory = Path(directory).resolve()
    base, below = _base_of(directory)
    tokenizer, model = load_base(base, dtype)
    for adapter in [*below, directory]:
        if not is_adapter_dir(adapter):
            raise ConfigError(f"adapter {directory}: {adapter} (listed in {BASE_FILE}) holds no {ADAPTER_CONFIG}")
        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    if (directory / "tokenizer_config.json").is_file():
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    return tokenizer, model
