"""Small text helpers shared by the module library.

Clipping, labelled-section and list parsing that tolerate a small model's formatting, a lexical
ranker (tool search, page search), prompt lookup (the harness's ``prompt.yaml`` entry first, the
library template ``jitlab/modules/templates/<key>.j2`` second) and step/event rendering.

Every parser accepts any string and returns something usable (possibly empty): modules built on
them fall back to heuristics when a 135M backbone replies garbage.
"""
from __future__ import annotations

import math
import re
from collections import Counter

from jitlab.modules.prompting import render, render_file
from jitlab.protocol import Event

__all__ = ["clip", "render_prompt", "user", "sections", "list_items", "parse_subtasks", "lexical_rank",
           "tokens", "is_failure", "normalize", "step_pairs", "meaningful"]

_STOP = frozenset("a an the to of in on at and or is are be it this that for with you your i my "
                  "will do does what next then action observation".split())
_FAIL_RE = re.compile(r"nothing happens|unknown (tool|command)|can't|cannot|not possible|no such|"
                      r"error|invalid|don't understand|not recogni[sz]ed|you can't|blocked|failed", re.I)
_LABEL_LINE = re.compile(r"^\s*(thought|action|observation)\s*[:：]", re.I)


def clip(text, n: int) -> str:
    """One line of at most ``n`` characters (whitespace collapsed)."""
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: max(0, n - 3)].rstrip() + "..."


def render_prompt(prompts: dict, key: str, **values) -> str:
    """Render ``prompts[key]`` (a harness's prompt.yaml entry) if present, else the library template
    ``<key>.j2``. Either way StrictUndefined: a missing variable is an error."""
    source = prompts.get(key) if isinstance(prompts, dict) else None
    if isinstance(source, str) and source.strip():
        return render(source, **values)
    return render_file(f"{key}.j2", **values)


def user(text: str) -> list[dict]:
    """A one-message conversation."""
    return [{"role": "user", "content": text}]


def sections(text: str, labels: tuple[str, ...]) -> dict[str, str]:
    """Labelled sections ``Label: text`` (a section runs until the next label line). Labels match
    case-insensitively by prefix, with optional markdown bullets/bold; missing labels are absent."""
    pattern = re.compile(r"^[\s>*#\-]*\**\s*(" + "|".join(re.escape(l) for l in labels) + r")\w*\**\s*[:：]\**\s*(.*)$",
                         re.I | re.M)
    found: dict[str, str] = {}
    matches = list(pattern.finditer(str(text)))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = (m.group(2) + "\n" + text[m.end():end]).strip()
        key = next(l for l in labels if l.lower() == m.group(1).lower())
        if body and key not in found:
            found[key] = " ".join(body.split())
    return found


_ITEM_RE = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•]|step\s*\d+\s*[.):]?)\s+(.+?)\s*$", re.I | re.M)


def list_items(text: str, max_items: int = 8) -> list[str]:
    """Items of a numbered or bulleted list; lines that are Thought/Action echoes are skipped."""
    out = []
    for m in _ITEM_RE.finditer(str(text)):
        item = m.group(1).strip().strip("*").strip()
        if item and not _LABEL_LINE.match(item) and item not in out:
            out.append(item)
        if len(out) >= max_items:
            break
    return out


_DEPS_RE = re.compile(r"[\(\[]?\s*(?:after|depends on|deps?|requires|needs)\s*[:=]?\s*((?:#?\d+[\s,&and]*)+)[\)\]]?",
                      re.I)


def parse_subtasks(text: str, max_items: int = 6) -> list[tuple[str, list[int]]]:
    """``1. do X\\n2. do Y (after 1)`` -> [("do X", []), ("do Y", [0])]. Dependencies are 0-based
    indices of *earlier* items only (forward or self references are dropped, so the graph is acyclic)."""
    out = []
    for i, item in enumerate(list_items(text, max_items)):
        deps = []
        m = _DEPS_RE.search(item)
        if m:
            deps = sorted({int(d) - 1 for d in re.findall(r"\d+", m.group(1)) if 0 < int(d) <= i})
            item = (item[: m.start()] + item[m.end():]).strip(" -:;,.")
        if item:
            out.append((item, deps))
    return out


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9_]+", str(text).lower()) if t not in _STOP and len(t) > 1]


def lexical_rank(query: str, docs: list[str]) -> list[float]:
    """TF-IDF-weighted token overlap of ``query`` with each doc (higher is more relevant)."""
    docs_t = [tokens(d) for d in docs]
    n = len(docs_t)
    df = Counter(t for d in docs_t for t in set(d))
    q = set(tokens(query))
    scores = []
    for d in docs_t:
        counts = Counter(d)
        s = sum((1 + math.log(counts[t])) * math.log((n + 1) / (df[t] + 0.5)) for t in q if t in counts)
        scores.append(s / math.sqrt(len(d) + 1))
    return scores


def is_failure(observation: str) -> bool:
    """Does an observation read like a failed action (used to value/flush steps)?"""
    return bool(_FAIL_RE.search(str(observation)))


def normalize(text: str) -> str:
    return " ".join(str(text).lower().strip().strip(".!'\"`").split())


def meaningful(text: str, min_words: int = 3) -> bool:
    """Is a reply worth keeping as a summary (enough words, not just a Thought/Action echo)?"""
    body = "\n".join(l for l in str(text).splitlines() if not re.match(r"^\s*action\s*[:：]", l, re.I))
    return len(tokens(body)) >= min_words


def step_pairs(events: list[Event]) -> list[dict]:
    """Group events into steps: {step, action, thought, observation, reward}; a leading observation
    (the reset) becomes a step with an empty action."""
    pairs: list[dict] = []
    for e in events:
        if e.kind == "action":
            pairs.append({"step": e.step, "action": e.content, "thought": e.data.get("thought", ""),
                          "observation": "", "reward": 0.0})
        elif e.kind in ("observation", "tool_result"):
            if pairs and not pairs[-1]["observation"] and pairs[-1]["action"]:
                pairs[-1]["observation"] = e.content
                pairs[-1]["reward"] = float(e.data.get("reward", 0.0) or 0.0)
            else:
                pairs.append({"step": e.step, "action": "", "thought": "", "observation": e.content,
                              "reward": float(e.data.get("reward", 0.0) or 0.0)})
    return pairs
