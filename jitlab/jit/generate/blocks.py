"""Parse a generator's reply into harness files.

Accepted tagged blocks (one per file; when a file appears twice, the last block wins):

    <file name="memory.py">
    ...code...
    </file>

and, as a fallback for small models, Markdown fences whose info string or first comment names
the file (```python memory.py``` or a first line ``# memory.py``). Text outside blocks is ignored.
"""
from __future__ import annotations

import re

from jitlab.harness import HARNESS_FILES, OPTIONAL_FILES

__all__ = ["parse_blocks", "format_blocks", "KNOWN_FILES"]

KNOWN_FILES = tuple(HARNESS_FILES) + tuple(OPTIONAL_FILES)
_TAG = re.compile(r"<file\s+name\s*=\s*[\"']?([\w.]+)[\"']?\s*>\n?(.*?)</file>", re.S)
_FENCE = re.compile(r"```[ \t]*(?:[\w+-]+)?[ \t]*([\w.]*)[ \t]*\n(.*?)```", re.S)
_HEADER = re.compile(r"^\s*#\s*(?:file:\s*)?([\w.]+\.(?:py|yaml))\s*\n")


def parse_blocks(text: str) -> dict[str, str]:
    """{file name: content} for every known harness file found in ``text`` (last block wins)."""
    files: dict[str, str] = {}
    for name, body in _TAG.findall(text):
        if name in KNOWN_FILES:
            files[name] = _dedent_fence(body)
    if files:
        return files
    for name, body in _FENCE.findall(text):
        if not name:
            header = _HEADER.match(body)
            name = header.group(1) if header else ""
            body = body[header.end():] if header else body
        if name in KNOWN_FILES:
            files[name] = body
    return files


def _dedent_fence(body: str) -> str:
    """Small models often wrap a tagged block's body in a Markdown fence too: strip it."""
    stripped = body.strip("\n")
    fence = re.match(r"^```[\w+-]*\n(.*?)\n?```\s*$", stripped, re.S)
    return (fence.group(1) if fence else stripped) + "\n"


def format_blocks(files: dict[str, str]) -> str:
    """The inverse of parse_blocks: how references and repair prompts show files."""
    return "\n".join(f'<file name="{name}">\n{files[name].rstrip()}\n</file>' for name in sorted(files))
