"""The one utility module a resolved harness may import besides the standard library and jitlab.protocol.

A resolved harness folder (see :mod:`jitlab.resolve`) vendors every piece of the module library it
uses, except these small helpers, which are plumbing rather than harness logic:

- text: ``clip``, ``normalize``, ``tokens``, ``meaningful``, ``is_failure``, ``user`` (a one-message conversation);
- reply parsing that tolerates a small model's formatting: ``sections`` (``Label: text``), ``list_items``,
  ``parse_subtasks`` (``2. do Y (after 1)``), ``step_pairs`` (events -> steps);
- ranking: ``lexical_rank`` (TF-IDF token overlap);
- templates: ``render`` (Jinja, StrictUndefined) and ``render_prompt(prompts, key)`` which renders the
  harness's own ``prompt.yaml`` entry. The resolver copies each library template a harness uses into its
  prompt.yaml, so a resolved harness never reads a template from the library.

Every parser accepts any string and returns something usable (possibly empty). The module library
(``jitlab.modules.text``) re-exports these, so library code and resolved code run the same functions.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

import jinja2

from jitlab.protocol import Event

__all__ = ["clip", "is_failure", "lexical_rank", "list_items", "meaningful", "normalize", "parse_subtasks",
           "render", "render_prompt", "sections", "step_pairs", "tokens", "user"]

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


@lru_cache(maxsize=512)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def render(source: str, **values) -> str:
    """Render a template string (a prompt.yaml entry); StrictUndefined, so a missing variable is an error."""
    return _compile(source).render(**values).strip()


def render_prompt(prompts: dict, key: str, **values) -> str:
    """Render the harness's prompt.yaml entry ``key`` (a KeyError naming the key when it has none)."""
    source = prompts.get(key) if isinstance(prompts, dict) else None
    if not (isinstance(source, str) and source.strip()):
        raise KeyError(f"prompt.yaml has no prompt {key!r}: add it (a resolved harness carries every prompt it uses)")
    return render(source, **values)


_STOP = frozenset("a an the to of in on at and or is are be it this that for with you your i my "
                  "will do does what next then action observation".split())
_FAIL_RE = re.compile(r"nothing happens|unknown (tool|command)|can't|cannot|not possible|no such|"
                      r"error|invalid|don't understand|not recogni[sz]ed|you can't|blocked|failed", re.I)
_LABEL_LINE = re.compile(r"^\s*(thought|action|observation)\s*[:：]", re.I)


def clip(text, n: int) -> str:
    """One line of at most ``n`` characters (whitespace collapsed)."""
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: max(0, n - 3)].rstrip() + "..."


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
