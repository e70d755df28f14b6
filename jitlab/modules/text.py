"""Small text helpers shared by the module library.

Clipping, labelled-section and list parsing that tolerate a small model's formatting, a lexical
ranker (tool search, page search) and step/event rendering live in :mod:`jitlab.harnesskit` (the one
utility module a resolved harness may import) and are re-exported here. ``render_prompt`` is the
library's prompt lookup: the harness's ``prompt.yaml`` entry first, the library template
``jitlab/modules/templates/<key>.j2`` second (the resolver copies the templates a harness uses into its
prompt.yaml, so resolved code uses ``jitlab.harnesskit.render_prompt``, which reads prompt.yaml only).

Every parser accepts any string and returns something usable (possibly empty): modules built on
them fall back to heuristics when a 135M backbone replies garbage.
"""
from __future__ import annotations

from jitlab.harnesskit import (  # noqa: F401  (re-exported: the library's helpers live in jitlab.harnesskit)
    clip,
    is_failure,
    lexical_rank,
    list_items,
    meaningful,
    normalize,
    parse_subtasks,
    render,
    sections,
    step_pairs,
    tokens,
    user,
)
from jitlab.modules.prompting import render_file

__all__ = ["clip", "render_prompt", "user", "sections", "list_items", "parse_subtasks", "lexical_rank",
           "tokens", "is_failure", "normalize", "step_pairs", "meaningful"]


def render_prompt(prompts: dict, key: str, **values) -> str:
    """Render ``prompts[key]`` (a harness's prompt.yaml entry) if present, else the library template
    ``<key>.j2``. Either way StrictUndefined: a missing variable is an error."""
    source = prompts.get(key) if isinstance(prompts, dict) else None
    if isinstance(source, str) and source.strip():
        return render(source, **values)
    return render_file(f"{key}.j2", **values)
