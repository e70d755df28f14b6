"""Code generator: prompt holds protocol/task/references, tagged blocks parsed, fallback to the nearest reference."""
import pytest
import yaml

from jitlab.errors import ConfigError
from jitlab.harness import HARNESS_FILES
from jitlab.jit.generate import get_generator
from jitlab.llm.scripted import ScriptedBackbone
from jitlab.resolve import resolve_file

ACTION = '''from jitlab.modules.basic import ReActAction


class Action(ReActAction):
    max_new_tokens = 32
'''


def test_prompt_holds_protocol_task_tools_and_references(toy_task, references):
    gen = get_generator("code:scripted:look")
    system, user = gen.messages(toy_task.public(), references)
    assert "class Memory" in system["content"] and "pre_action" in system["content"]
    assert "jitlab.modules.basic.FullHistory" in system["content"]
    assert toy_task.description in user["content"] and "act:" in user["content"]
    assert references[0].name in user["content"] and '<file name="action.py">' in user["content"]


def test_partial_reply_falls_back_to_the_nearest_reference(toy_task, references, handle):
    reply = f'chatter\n<file name="action.py">\nbroken\n</file>\n<file name="action.py">\n{ACTION}</file>'
    llm = handle(ScriptedBackbone(lambda m: reply, name="code-writer"))
    cand = get_generator("code:scripted:x", llm).generate(toy_task.public(), references, llm)
    assert cand.files["action.py"] == resolve_file(ACTION, "action.py")   # last block wins, stored resolved
    assert "jitlab.modules" not in cand.files["action.py"].replace("# library: jitlab.modules", "")
    assert "class ReActAction" in cand.files["action.py"] and "max_new_tokens = 32" in cand.files["action.py"]
    assert cand.meta["parsed_files"] == ["action.py"]
    assert set(cand.meta["fallback_files"]) == set(HARNESS_FILES) - {"action.py"}
    assert cand.files["memory.py"] == references[0].files["memory.py"]
    lineage = yaml.safe_load(cand.files["description.yaml"])["lineage"]
    assert lineage["generator"] == "code:scripted:x" and "memory.py" in lineage["fallback_files"]
    assert cand.prompt_hash and cand.parents == [r.sha for r in references]


def test_repair_keeps_files_the_reply_leaves_out(toy_task, references, handle):
    llm = handle(ScriptedBackbone(lambda m: f'<file name="action.py">\n{ACTION}</file>', name="fixer"))
    gen = get_generator("code:scripted:x", llm)
    cand = gen.generate(toy_task.public(), references, llm)
    broken = type(cand)({**cand.files, "action.py": "class Action(:\n"}, cand.generator)
    fixed = gen.repair(broken, {"kind": "parse_error", "file": "action.py", "line": 1, "message": "invalid syntax"},
                       toy_task.public(), llm)
    assert fixed.files["action.py"] == resolve_file(ACTION, "action.py")
    assert fixed.files["memory.py"] == broken.files["memory.py"]
    assert fixed.meta["repair_parsed_files"] == ["action.py"]


def test_references_and_repair_prompts_show_resolved_source(toy_task, references, handle):
    """A reference or broken candidate that subclasses the library is shown with that library code written out (a
    repair prompt under ``repair_view: resolved``; the default thin view: next test)."""
    thin = {**references[0].files, "action.py": ACTION}
    ref = type(references[0])(references[0].sha, references[0].name, references[0].description, thin)
    _, user = get_generator("code:scripted:x").messages(toy_task.public(), [ref])
    assert "from jitlab.modules" not in user["content"] and "def parse_react" in user["content"]
    seen = []
    llm = handle(ScriptedBackbone(lambda m: seen.append(m) or "no blocks", name="fixer"))
    gen = get_generator("code:scripted:x", llm, repair_view="resolved")
    cand = gen.generate(toy_task.public(), [ref], llm)
    gen.repair(cand, {"kind": "runtime_error", "message": "boom"}, toy_task.public(), llm)
    assert "from jitlab.modules" not in seen[-1][-1]["content"] and "def parse_react" in seen[-1][-1]["content"]


def test_a_thin_repair_prompt_shows_the_broken_file_without_its_library_code(toy_task, references, handle):
    seen = []
    llm = handle(ScriptedBackbone(lambda m: seen.append(m) or "no blocks", name="fixer"))
    gen = get_generator("code:scripted:x", llm)
    cand = gen.generate(toy_task.public(), references, llm)
    assert "# library: jitlab.modules" in cand.files["action.py"]                 # stored resolved
    trace = 'Traceback (most recent call last):\n  File "action.py", line 3, in act\nKeyError: \'x\'\n'
    gen.repair(cand, {"kind": "runtime_error", "message": "boom", "traceback": trace}, toy_task.public(), llm)
    prompt = seen[-1][-1]["content"]
    assert '<file name="action.py">' in prompt and '<file name="memory.py">' not in prompt   # the file the trace names
    assert "from jitlab.modules." in prompt and "# library: " not in prompt         # imported, not written out
    assert "memory.py" in prompt.split("not shown")[0].rsplit("\n", 1)[-1]               # the others by name
    with pytest.raises(ConfigError, match="--repair-view must be thin or resolved"):
        get_generator("code:scripted:x", repair_view="all")
