"""Stage III (Evo-GDPO) reward channels through TRL's own GRPOTrainer: a 1-step GRPO run on a tiny random model (built
here in memory: a test double of a policy, 2 layers, word-level tokenizer) whose reward functions are
``ChannelRewards`` over hand-made outcomes; the advantages read back are the ones TRL computed and trained on.
Checks: a candidate that loses on reward gets no credit for being cheap (its advantage does not move when its
latency/cost do), and each channel is normalised on its own (rescaling a channel changes nothing)."""
import math

import pytest

from jitlab.train.evo import CHANNELS, ChannelRewards, Outcome, channels, grpo_aggregation

INC = Outcome(True, reward=0.5, latency=100, cost=1.0)


def test_channels_gate_efficiency_on_keeping_the_incumbents_reward():
    cheap_loser = channels(Outcome(True, reward=0.0, latency=1, cost=0.0), INC)
    assert cheap_loser == {"valid": 1.0, "task_delta": -0.5, "latency_gain": None, "cost_gain": None}
    tie = channels(Outcome(True, reward=0.5, latency=49, cost=1.0), INC)
    assert tie["latency_gain"] == pytest.approx(math.log(101 / 50)) and tie["cost_gain"] == 0.0   # dead band
    invalid = channels(Outcome(False, reward=1.0, latency=1), INC)   # an invalid candidate's reward does not count
    assert invalid["valid"] == 0.0 and invalid["task_delta"] == -0.5 and invalid["latency_gain"] is None


def _tiny_policy():
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    words = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(29)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="<unk>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                         max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
                                         bos_token_id=None))
    return tokenizer, model


def _advantages(outcomes, tmp_path, inc=INC, aggregation=None):
    """TRL's advantages for one group of 4 candidates whose evaluations are ``outcomes`` (by position)."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    tokenizer, model = _tiny_policy()
    rewards = ChannelRewards(lambda prompts, completions, rows: list(outcomes), lambda row: inc)
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=4, report_to="none", bf16=False, activation_checkpointing=False,
                      use_cpu=True, logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0,
                      **{**grpo_aggregation(), **(aggregation or {})})
    dataset = Dataset.from_list([{"prompt": "w3 w4 w5", "task_id": "t0"}])
    trainer = GRPOTrainer(model=model, reward_funcs=rewards.functions(), args=args, train_dataset=dataset,
                          processing_class=tokenizer)
    trainer.train()
    assert trainer.reward_func_names == list(CHANNELS)
    logged = {name: list(trainer._logs["rewards"][name]) for name in CHANNELS}
    assert len(rewards.records) == 4 and [r["row"]["task_id"] for r in rewards.records] == ["t0"] * 4
    return list(trainer._logs["advantages"]), logged


def test_a_candidate_that_loses_on_reward_gets_no_credit_for_being_cheap(tmp_path):
    group = [Outcome(True, reward=0.5, latency=50, cost=0.5),     # ties the incumbent, cheaper: gated in
             Outcome(True, reward=1.0, latency=200, cost=2.0),    # beats it, costlier: gated in
             Outcome(True, reward=0.0, latency=1, cost=0.0),      # loses, but very cheap: gated out
             Outcome(False)]                                      # invalid
    adv, logged = _advantages(group, tmp_path / "a")
    assert math.isnan(logged["latency_gain"][2]) and math.isnan(logged["cost_gain"][3])   # None reached TRL as NaN
    assert adv[2] < min(adv[0], adv[1]) and adv[3] < adv[2]
    assert abs(sum(adv)) < 1e-4

    pricier_loser = [*group[:2], Outcome(True, reward=0.0, latency=10_000, cost=99.0), group[3]]
    adv2, _ = _advantages(pricier_loser, tmp_path / "b")
    assert adv2 == pytest.approx(adv, abs=1e-5)   # the loser's cost does not enter anyone's advantage



def test_each_channel_is_normalised_on_its_own(tmp_path):
    group = [Outcome(True, reward=0.5, latency=50, cost=0.5), Outcome(True, reward=1.0, latency=200, cost=2.0),
             Outcome(True, reward=0.0, latency=1, cost=0.0), Outcome(False)]
    wide = [Outcome(o.valid, o.reward * 10, o.latency, o.cost) for o in group]     # a task channel 10x as wide
    wide_inc = Outcome(True, reward=INC.reward * 10, latency=INC.latency, cost=INC.cost)
    adv, _ = _advantages(group, tmp_path / "a")
    wide_adv, _ = _advantages(wide, tmp_path / "b", wide_inc)
    assert wide_adv == pytest.approx(adv, abs=1e-3)      # z-scored per channel: the scale of a channel does not matter
    summed = {"multi_objective_aggregation": "sum_then_normalize"}
    # the contrast: TRL's default sums first, so the wider channel swamps the others and the advantages change
    assert _advantages(group, tmp_path / "c", aggregation=summed)[0] != pytest.approx(
        _advantages(wide, tmp_path / "d", wide_inc, aggregation=summed)[0], abs=1e-2)


def test_signal_share_counts_the_groups_whose_advantage_is_not_zero(tmp_path):
    from jitlab.train.evo import signal_share
    assert signal_share([1.0, 1.0, -1.0, 0.5, 0.0, 0.0], 2) == {"groups": 3, "nonzero": 1, "share": 1 / 3}
    assert signal_share([1.0], 2)["share"] is None                                     # no complete group
    gated = [{"task_delta": 0.0, "latency_gain": 0.3}, {"task_delta": 0.0, "latency_gain": None}]
    assert signal_share(gated, 2)["nonzero"] == 0           # one gated-in value: TRL's nanstd is NaN, advantage 0
    cheaper = [{"task_delta": 0.0, "latency_gain": 0.3}, {"task_delta": 0.0, "latency_gain": 0.1}]
    assert signal_share(cheaper, 2)["nonzero"] == 1
    # against TRL's own advantages: a group of four invalid candidates trains on nothing, a mixed one does
    flat, _ = _advantages([Outcome(False)] * 4, tmp_path / "flat")
    mixed = [Outcome(True, reward=0.5, latency=50, cost=0.5), Outcome(False), Outcome(False), Outcome(False)]
    moving, _ = _advantages(mixed, tmp_path / "mixed")
    assert all(a == 0 for a in flat) and any(a != 0 for a in moving)
    assert signal_share([channels(o, INC) for o in [Outcome(False)] * 4], 4)["share"] == 0.0
    assert signal_share([channels(o, INC) for o in mixed], 4)["share"] == 1.0


def _grpo_step(tmp_path, micro_batch):
    """One GRPO step of the tiny policy on a group of 4 with ``grpo_batching``'s fields, plain SGD (lr 1, so the
    weights move by minus the accumulated gradient) and a test-double reward that differs within the group; returns
    (weight change per parameter, the largest batch that went through a forward with gradients)."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from jitlab.train.config import EngineerGRPOConfig
    from jitlab.train.stage3 import grpo_batching
    tokenizer, model = _tiny_policy()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    sizes = []
    model.register_forward_hook(lambda m, args, kwargs, out: sizes.append(kwargs["input_ids"].shape[0])
                                if torch.is_grad_enabled() else None, with_kwargs=True)
    cfg = EngineerGRPOConfig(data="unused", num_generations=4, grad_accum=1, micro_batch=micro_batch)
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, num_generations=4, max_completion_length=4,
                      report_to="none", bf16=False, activation_checkpointing=False, use_cpu=True, logging_steps=1,
                      save_strategy="no", disable_tqdm=True, seed=0, **grpo_batching(cfg))
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda prompts, completions, **kw: [float(i) for i in
                                                                                      range(len(completions))]],
                          args=args, train_dataset=Dataset.from_list([{"prompt": "w3 w4 w5"}]),
                          processing_class=tokenizer, optimizers=(torch.optim.SGD(model.parameters(), lr=1.0), None))
    trainer.train()
    return {n: p.detach() - before[n] for n, p in model.named_parameters()}, max(sizes)


def test_a_micro_batched_grpo_step_accumulates_to_the_whole_groups_update(tmp_path):
    pytest.importorskip("trl")
    whole, whole_batch = _grpo_step(tmp_path / "whole", None)
    micro, micro_batch = _grpo_step(tmp_path / "micro", 1)
    assert whole_batch == 4 and micro_batch == 1          # the loss forward holds the micro-batch, not the group
    assert max(float(d.abs().max()) for d in micro.values()) > 1e-4          # the weights moved
    for name, delta in whole.items():                     # and by the same update as the whole group's
        assert micro[name].numpy() == pytest.approx(delta.numpy(), abs=1e-6, rel=1e-3), name
