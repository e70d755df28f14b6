"""One GGUF-to-checkpoint converter (issue 28 item 4): the hf backbone's loader and ``jitlab.llm.serve`` share
``jitlab.llm.hf.load.materialize_gguf`` and its one cache folder under ``JITLAB_HOME/data/models``.

The conversion itself is a TEST DOUBLE here (``_convert`` writes a tiny random Llama checkpoint instead of
de-quantizing a real GGUF, which takes about 25 s and 540 MB for the embedded model); what is checked is that
both entry points reach the same folder, convert once, and that the loader reads the converted folder.
"""
from __future__ import annotations

from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from jitlab.llm import serve  # noqa: E402
from jitlab.llm.hf import load  # noqa: E402


def _tiny_checkpoint(gguf: Path, folder: Path) -> None:
    """TEST DOUBLE of load._convert: a random 1-layer Llama with a word-level tokenizer, written with its DONE mark."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    words = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", "hello", "world"])}
    tok = Tokenizer(WordLevel(words, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                                     eos_token="</s>")
    config = transformers.LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                      architectures=["LlamaForCausalLM"])
    folder.mkdir(parents=True)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "DONE").write_text(f"test double for {gguf}\n")


def test_the_hf_loader_and_serve_share_one_converter_and_its_cache(tmp_path, monkeypatch):
    import torch
    monkeypatch.setenv("JITLAB_HOME", str(tmp_path / "home"))  # not the data dir tests share: a fresh models/
    gguf = tmp_path / "models" / "tiny.Q4_0.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF not a real model")
    made = []
    monkeypatch.setattr(load, "_convert", lambda g, f: (made.append((g, f)), _tiny_checkpoint(g, f)))
    assert serve.materialize_gguf is load.materialize_gguf

    _, model, converted = load._load(gguf.parent, gguf.name, "cpu", torch.float32, True)
    assert converted == load.gguf_folder(gguf) and (converted / "DONE").is_file()
    assert converted.parent == Path(load.data_dir("models")) and model.config.num_hidden_layers == 1
    assert made == [(gguf, converted)]

    assert serve.materialize_gguf(gguf) == converted            # serve finds the loader's folder: no second copy
    _, _, again = load._load(gguf.parent, gguf.name, "cpu", torch.float32, True)
    assert again == converted and len(made) == 1                 # converted once
    assert [p.name for p in converted.parent.iterdir()] == [converted.name]


def test_an_unwritable_cache_only_costs_speed(tmp_path, monkeypatch, caplog):
    """A checkpoint that cannot be written is logged and the GGUF is loaded directly (here it is not a real GGUF,
    so that load fails with the loader's one-line error)."""
    import torch

    from jitlab.errors import ConfigError
    monkeypatch.setenv("JITLAB_HOME", str(tmp_path / "home"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"not a GGUF file, no magic bytes")

    def full_disk(g, f):
        raise OSError("No space left on device")
    monkeypatch.setattr(load, "_convert", full_disk)
    with pytest.raises(ConfigError, match=r"could not load a causal LM from .*#tiny.gguf"):
        load._load(gguf.parent, gguf.name, "cpu", torch.float32, True)
    assert "could not save the converted GGUF checkpoint" in caplog.text
    with pytest.raises(ConfigError, match="could not write the model folder"):
        serve.materialize_gguf(gguf)
