"""The plan format's default training lengths fit its real examples (issue 27 item 13 found it: notebook 02 at its
defaults stopped with "max_length 1024 leaves no room for the completion in any sft example: the prompts are
1207-1207 tokens" once the couplings joined the plan prompt). Counted with the embedded SmolLM2 tokenizer on each
suite's first dev task, with the references a B0 bank retrieves, as Stage I data and Stage II data build them."""
import pytest

PLAN_TOKENS = 100   # a plan is 45-75 tokens (jitlab.jit.generate.plan); the evaluation allows 96


@pytest.mark.parametrize("suite_name", ["textworld", "babyai", "dbbench"])
def test_a_plan_prompt_and_a_plan_repair_prompt_fit_the_default_max_length(tmp_path, embedded_tokens, suite_name):
    tokens = embedded_tokens
    from jitlab.envs.base import get_suite
    from jitlab.jit.bank import Bank
    from jitlab.jit.generate import get_generator, references
    from jitlab.train.config import Stage1Config, Stage1DataConfig, Stage2Config
    from jitlab.train.repair_data import repair_prompt
    task = get_suite(suite_name).tasks("dev")[0]
    bank = Bank.create(tmp_path / "b0.sqlite", seeds=True)
    try:
        refs = references(bank, task.description, Stage1DataConfig.__dataclass_fields__["k_references"].default)
    finally:
        bank.close()
    prompt = get_generator("plan:student").messages(task.public(), refs)
    plan = {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "NoSuchAction", "prompt": "react"}
    diagnostic = {"kind": "plan_error", "message": "A: unknown module 'NoSuchAction'; use one of the catalogue's"}
    repair = repair_prompt("plan:student", {}, diagnostic, task.public(), meta={"plan": plan})
    assert tokens(prompt) + PLAN_TOKENS <= Stage1Config(data="d").max_length, tokens(prompt)
    assert tokens(repair) + PLAN_TOKENS <= Stage2Config(data="d").max_length, tokens(repair)
    if suite_name == "textworld":
        assert tokens(prompt) + PLAN_TOKENS > 1024   # why the old default of 1024 fit no example
