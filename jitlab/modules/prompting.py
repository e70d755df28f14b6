"""Jinja rendering for prompt templates (StrictUndefined: a missing variable is an error)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

__all__ = ["render", "render_file", "TEMPLATE_DIR"]

TEMPLATE_DIR = Path(__file__).parent / "templates"
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                          loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)))


@lru_cache(maxsize=512)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def render(source: str, **values) -> str:
    """Render a template string (from a harness's prompt.yaml)."""
    return _compile(source).render(**values).strip()


def render_file(name: str, **values) -> str:
    """Render a template file shipped in jitlab/modules/templates/."""
    return _ENV.get_template(name).render(**values).strip()
