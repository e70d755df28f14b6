"""Jinja rendering for prompt templates (StrictUndefined: a missing variable is an error).

``render`` (a prompt.yaml string) lives in :mod:`jitlab.harnesskit`; ``render_file`` renders a library template.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from jitlab.harnesskit import render  # noqa: F401  (a prompt.yaml string; re-exported)

__all__ = ["render", "render_file", "TEMPLATE_DIR"]

TEMPLATE_DIR = Path(__file__).parent / "templates"
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                          loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)))


def render_file(name: str, **values) -> str:
    """Render a template file shipped in jitlab/modules/templates/."""
    return _ENV.get_template(name).render(**values).strip()
