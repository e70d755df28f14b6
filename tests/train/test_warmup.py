"""Issue 27 item 15: a smoke-size training run trains. The warm-up is ``floor(ratio x steps)`` and never every step
(:func:`jitlab.train.common.warmup_steps`), so a 1-step run has lr > 0 on its step; transformers' ``ceil(0.1 x 1)`` = 1
warm-up step gave that step lr 0 and left the LoRA adapters exactly zero. The training test here runs Stage I's real
SFT (TRL, peft, torch) for one step on a TEST DOUBLE model: a randomly initialised 1-layer Llama (hidden size 16)
with a byte-level tokenizer built here, so it costs seconds and needs no model package."""
import json
import math
import warnings

import pytest

from jitlab.train.common import training_arguments, warmup_steps
from jitlab.train.config import Stage1Config


@pytest.mark.parametrize("ratio, steps, expected", [(0.1, 1, 0), (0.1, 2, 0), (0.1, 10, 1), (0.1, 25, 2),
                                                    (0.5, 2, 1), (1.0, 4, 3), (0.0, 7, 0)])
def test_warmup_never_takes_every_step(ratio, steps, expected):
    assert warmup_steps(ratio, steps) == expected < steps


def test_an_epoch_run_sizes_its_warmup_from_its_examples():
    cfg = Stage1Config(data="d", grad_accum=4, sft_steps=None, sft_epochs=1.0)
    assert training_arguments(cfg, "o", None, 1.0, 1e-4, examples=3)["warmup_steps"] == 0      # one step: none
    assert training_arguments(cfg, "o", None, 2.0, 1e-4, examples=80)["warmup_steps"] == 4     # 40 steps: floor(4)
    assert training_arguments(cfg, "o", 1, 2.0, 1e-4)["warmup_steps"] == 0


def tiny_model(folder):
    """Write the test-double model (random weights) and its byte-level tokenizer with a chat template to ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    specials = ["<|im_start|>", "<|im_end|>", "<pad>"]
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab.update({s: len(vocab) + i for i, s in enumerate(specials)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<pad>"], bos_token_id=None)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_a_one_step_stage1_run_moves_the_lora_weights(tmp_path):
    """``jitlab train stage1 --set sft_steps=1 --set dpo=false`` (as ``make pipeline-smoke`` runs it) saved an adapter
    whose lora_B weights were all zero: the one step ran at learning rate 0."""
    pytest.importorskip("trl")
    from safetensors.torch import load_file

    from jitlab.train.stage1 import run_stage1
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"prompt": [{"role": "user", "content": f"task {i}: go north"}],
             "completion": [{"role": "assistant", "content": '{"M": "FullHistory"}'}], "split": "dev"} for i in range(2)]
    (data / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "stage1"
    cfg = Stage1Config(data=str(data), base=f"hf:{tiny_model(tmp_path / 'tiny')}", sft_steps=1, dpo=False,
                       grad_accum=1, max_length=128, save_steps=1, report_to="none", threads=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manifest = run_stage1(cfg, out)
    assert not _probe(caught), "peft's is_gradient_checkpointing probe warned (the executed copies of 02-04 showed it)"
    assert manifest["phases"]["sft"]["global_step"] == 1 and math.isfinite(manifest["phases"]["sft"]["last_loss"])
    history = [json.loads(line) for line in (out / "sft" / "log_history.jsonl").read_text().splitlines()]
    assert [h["learning_rate"] for h in history if "learning_rate" in h] == [cfg.sft_learning_rate]
    weights = load_file(out / "sft" / "adapter" / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if k.endswith("lora_B.weight")]
    assert lora_b and sum(float(v.abs().sum()) for v in lora_b) > 0, "the LoRA adapters did not move"


def _probe(caught) -> list[str]:
    return [str(w.message) for w in caught if "is_gradient_checkpointing" in str(w.message)]


def test_loading_a_trained_adapter_shows_no_checkpointing_probe_warning(tmp_path):
    """An adapter loaded as a backbone (``hf:<adapter>``, the notebooks' evaluation cells): peft wraps the base and
    reads transformers' deprecated ``is_gradient_checkpointing``; jitlab filters exactly that warning."""
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    from jitlab.llm.adapters import load_adapter, write_base
    from jitlab.llm.hf import load_base
    base = tiny_model(tmp_path / "tiny")
    with warnings.catch_warnings():   # writing the test's adapter: peft's probe is allowed to warn here
        warnings.simplefilter("ignore")
        peft_model = get_peft_model(LlamaForCausalLM.from_pretrained(base),
                                    LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM"))
    peft_model.save_pretrained(tmp_path / "adapter")
    write_base(tmp_path / "adapter", f"hf:{base}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_adapter(tmp_path / "adapter", load_base)
        warnings.warn("another FutureWarning", FutureWarning, stacklevel=1)   # the filter is that one warning only
    assert not _probe(caught) and "another FutureWarning" in [str(w.message) for w in caught]
