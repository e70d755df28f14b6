from jitlab.jit.generate.blocks import format_blocks, parse_blocks


def test_tagged_blocks_last_wins_and_unknown_ignored():
    text = ('chatter\n<file name="memory.py">\nA = 1\n</file>\n<file name="evil.sh">\nrm -rf /\n</file>\n'
            '<file name="memory.py">\nA = 2\n</file>')
    assert parse_blocks(text) == {"memory.py": "A = 2\n"}


def test_fenced_body_inside_tag_is_unwrapped():
    assert parse_blocks('<file name="action.py">\n```python\nX = 1\n```\n</file>') == {"action.py": "X = 1\n"}


def test_markdown_fences_named_by_info_or_header():
    text = "```python planning.py\nP = 1\n```\n```python\n# tool_policy.py\nF = 1\n```\n```\nno name\n```"
    assert parse_blocks(text) == {"planning.py": "P = 1\n", "tool_policy.py": "F = 1\n"}


def test_round_trip():
    files = {"memory.py": "A = 1\n", "prompt.yaml": "system: hi\n"}
    assert parse_blocks(format_blocks(files)) == files
