"""Stage III plumbing without a policy model: plans validated and run in the real sandbox on the toy suite with a
scripted executor (a test double), evaluations cached by (sha, task, seed), channels against the incumbent, and the
config's input checks."""
import pytest

from jitlab.errors import ConfigError
from jitlab.train.config import CONFIG_DIR, Stage3Config, load_config

REACT = '{"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"}'


def test_config_checks_and_gpu_profile():
    with pytest.raises(ConfigError, match="never trains on test"):
        Stage3Config(split="test")
    with pytest.raises(ConfigError, match="--weights needs 4 numbers"):
        Stage3Config(weights=[1.0])
    gpu = load_config(Stage3Config, CONFIG_DIR / "gpu" / "stage3.yaml", {"steps": "2"})
    assert gpu.bf16 and gpu.num_generations == 8 and gpu.steps == 2


def test_plans_are_validated_run_and_cached_and_scored_against_the_incumbent(tmp_path):
    from jitlab.envs.base import get_suite
    from jitlab.harness import read_files, seed_bank_dir
    from jitlab.llm import get_backbone
    from jitlab.sandbox import probe
    from jitlab.train.evo import ChannelRewards
    from jitlab.train.stage3 import PlanEvaluator
    cfg = Stage3Config(suite="toy", executor="scripted:pick-first", episode_steps=3, smoke_steps=1,
                       allow_unisolated=not probe()[0])
    suite = get_suite("toy")
    task = suite.tasks("dev")[0]
    ev = PlanEvaluator(suite, get_backbone(cfg.executor), cfg, tmp_path)
    good = ev.plan(REACT, task)
    assert good.valid and good.meta["status"] in ("ok", "budget") and good.latency == good.meta["calls"] > 0
    assert not ev.plan("not a plan", task).valid
    again = ev.plan(REACT, task)
    assert again.meta["cache_hit"] and again.reward == good.reward and ev.hits == 1
    assert (tmp_path / "evaluations.json").is_file()

    inc_files = read_files(seed_bank_dir() / "random")
    rewards = ChannelRewards(lambda p, cs, rows: [ev.plan(c, task) for c in cs],
                             lambda row: ev.harness(inc_files, task))
    values = {f.__name__: f(prompts=["p"] * 2, completions=[REACT, "junk"], task_id=["t", "t"])
              for f in rewards.functions()}
    assert values["valid"] == [1.0, 0.0] and values["latency_gain"][1] is None
    assert len(rewards.records) == 2     # one evaluation for the four channel functions


def test_episode_steps_0_plays_the_tasks_own_budget(tmp_path):
    # BabyAI's Stage III at the default 5 steps: every candidate solved the same families and failed the same others,
    # so no group's valid candidates differed in outcome; 0 plays each candidate for the task's own step budget
    from jitlab.envs.base import get_suite
    from jitlab.llm import get_backbone
    from jitlab.sandbox import probe
    from jitlab.train.stage3 import PlanEvaluator
    suite = get_suite("toy")
    task = suite.tasks("dev")[0]
    calls = {}
    for steps in (1, 0):
        cfg = Stage3Config(suite="toy", executor="scripted:pick-first", episode_steps=steps, smoke_steps=1,
                           allow_unisolated=not probe()[0])
        calls[steps] = PlanEvaluator(suite, get_backbone(cfg.executor), cfg, tmp_path / str(steps)).plan(REACT, task)
    assert calls[1].meta["calls"] == 1 and calls[0].meta["calls"] == task.max_steps > 1


def test_fewer_tasks_than_grad_accum_still_fill_trls_generation_batch():
    # before: 1 task with grad_accum 4 gave TRL's RepeatSampler an incomplete chunk, dropped, so GRPO trained 0 steps
    from trl.trainer.utils import RepeatSampler

    from jitlab.train.stage3 import generation_rows
    cfg = Stage3Config(tasks=1, num_generations=2, grad_accum=4)
    rows = generation_rows([{"prompt": "p", "task_id": "t0"}], cfg)
    generation_batch = cfg.num_generations * cfg.grad_accum       # per_device_train_batch_size x steps_per_generation
    sampler = RepeatSampler(rows, mini_repeat_count=cfg.num_generations,
                            batch_size=generation_batch // cfg.num_generations, repeat_count=cfg.grad_accum)
    assert len(list(sampler)) >= generation_batch and {r["task_id"] for r in rows} == {"t0"}


def test_code_completions_are_parsed_completed_from_the_nearest_reference_and_run(tmp_path):
    from jitlab.envs.base import get_suite
    from jitlab.harness import read_files, seed_bank_dir
    from jitlab.jit.generate.blocks import format_blocks
    from jitlab.llm import get_backbone
    from jitlab.sandbox import probe
    from jitlab.train.stage3 import PlanEvaluator
    cfg = Stage3Config(suite="toy", executor="scripted:pick-first", episode_steps=3, smoke_steps=1, format="code",
                       allow_unisolated=not probe()[0])
    suite = get_suite("toy")
    task = suite.tasks("dev")[0]
    react = read_files(seed_bank_dir() / "react")
    ev = PlanEvaluator(suite, get_backbone(cfg.executor), cfg, tmp_path)
    reply = "Here it is:\n" + format_blocks({"memory.py": react["memory.py"]})
    out = ev.plan(reply, task, nearest=react)
    assert out.valid and out.meta["parsed"] and ev.files[out.meta["sha"]] == react   # the rest from the reference
    junk = ev.plan(REACT, task, nearest=react)                        # a plan is not a file block
    assert not junk.valid and junk.meta["kind"] == "parse_error"
    broken = ev.plan(format_blocks({"memory.py": "def broken(:\n"}), task, nearest=react)
    assert broken.meta["parsed"] and not broken.valid and broken.meta["kind"] == "parse_error"   # the sandbox: a SyntaxError


def test_micro_batch_must_split_the_group_and_sets_trls_batch_fields():
    from trl import GRPOConfig

    from jitlab.train.config import EngineerGRPOConfig
    from jitlab.train.stage3 import grpo_batching
    with pytest.raises(ConfigError, match="--micro-batch 3 does not divide --num-generations 4"):
        Stage3Config(num_generations=4, micro_batch=3)
    with pytest.raises(ConfigError, match="does not divide"):
        EngineerGRPOConfig(data="d", num_generations=8, micro_batch=3)
    for micro in (None, 2, 1):
        cfg = Stage3Config(num_generations=4, grad_accum=3, micro_batch=micro)
        args = GRPOConfig(output_dir="unused", num_generations=4, use_cpu=True, bf16=False, report_to="none",
                          **grpo_batching(cfg))
        assert args.per_device_train_batch_size == (micro or 4)
        assert args.generation_batch_size == 12                    # the same 3 groups per optimizer step


def test_the_spend_caps_bound_every_evaluation_and_a_capped_one_is_never_cached(tmp_path):
    """Stage III plays episodes: its caps (jitlab/run_options.py) count every validation and episode, with what the
    cached evaluations spent, and its wall budget bounds each episode."""
    from jitlab.envs.base import get_suite
    from jitlab.llm import get_backbone
    from jitlab.runtime import SpendCapReached
    from jitlab.sandbox import probe
    from jitlab.train.stage3 import PlanEvaluator
    suite = get_suite("toy")
    task = suite.tasks("dev")[0]

    def evaluator(**kw):
        cfg = Stage3Config(suite="toy", executor="scripted:pick-first", episode_steps=3, smoke_steps=1,
                           allow_unisolated=not probe()[0], **kw)
        return PlanEvaluator(suite, get_backbone(cfg.executor), cfg, tmp_path, None)
    first = evaluator(max_wall_s=60.0).plan(REACT, task)          # no replay cache: every call costs
    assert first.valid and first.cost > 0 and first.meta["tokens"] > 0
    capped = evaluator(max_tokens_total=first.meta["tokens"])     # the cached evaluation already spent that much
    assert capped.spend.tokens == first.meta["tokens"]
    assert capped.plan(REACT, task).meta["cache_hit"]             # a cached evaluation costs nothing more
    other = REACT.replace("FullHistory", "PeriodicSummaryMemory")
    with pytest.raises(SpendCapReached, match="max-tokens-total"):
        capped.plan(other, task)
    assert len(capped.cache) == 1                                 # nothing capped was cached
    outcome = evaluator(max_wall_s=1e-6).plan(other, task)
    assert outcome.valid and outcome.meta["status"] == "budget"   # the wall budget bounds each episode
