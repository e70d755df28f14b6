"""Backbone prices: a small YAML table of dollars per million tokens, looked up by backbone id.

Format (one entry per model; keys may use shell wildcards)::

    embedded:smollm2-135m-instruct: {input_per_mtok: 0.10, output_per_mtok: 0.10}
    litellm:openai/my-vllm-model:   {input_per_mtok: 0.0,  output_per_mtok: 0.0}

``load_pricing(path)`` reads a file, ``default_pricing()`` the one shipped next to this module
(its comments say where each default number comes from), ``find_price(table, *names)`` returns the
first matching entry, ``known_price(backbone, options)`` the price of a backbone by its name, without loading it.
Caveat: prices are whatever the table says; nothing here is fetched.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.llm.base import PACKAGED_IDS
from jitlab.llm.scripted import PRICE_PER_TOKEN

__all__ = ["DEFAULT_PRICING", "Price", "default_pricing", "find_price", "known_price", "load_pricing",
           "resolve_pricing"]

DEFAULT_PRICING = Path(__file__).with_name("pricing.yaml")


@dataclass(frozen=True)
class Price:
    """Dollars per million prompt (input) and completion (output) tokens."""
    input_per_mtok: float = field(default=0.0, metadata={"help": "USD per 1M prompt tokens"})
    output_per_mtok: float = field(default=0.0, metadata={"help": "USD per 1M completion tokens"})

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


def load_pricing(path: str | Path) -> dict[str, Price]:
    """Read a pricing YAML ``{model: {input_per_mtok, output_per_mtok}}``."""
    import yaml
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"pricing file {path} does not exist; pass a YAML file "
                          "{model: {input_per_mtok: X, output_per_mtok: Y}}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"pricing file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"pricing file {path} must map model names to prices, got {type(data).__name__}")
    table = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or not set(entry) <= {"input_per_mtok", "output_per_mtok"}:
            raise ConfigError(f"pricing file {path}: entry {model!r} must be "
                              "{input_per_mtok: X, output_per_mtok: Y}, got {entry!r}")
        try:
            table[str(model)] = Price(float(entry.get("input_per_mtok", 0.0)), float(entry.get("output_per_mtok", 0.0)))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"pricing file {path}: entry {model!r} has a non-numeric price: {exc}") from exc
    return table


@lru_cache(maxsize=1)
def _default() -> dict[str, Price]:
    return load_pricing(DEFAULT_PRICING)


def default_pricing() -> dict[str, Price]:
    """The shipped defaults (see the comments in pricing.yaml)."""
    return dict(_default())


def resolve_pricing(pricing) -> dict[str, Price]:
    """Defaults overlaid with ``pricing`` (None, a path, or a dict of Price / plain dicts)."""
    table = default_pricing()
    if pricing is None:
        return table
    if isinstance(pricing, (str, Path)):
        table.update(load_pricing(pricing))
        return table
    if isinstance(pricing, dict):
        for model, entry in pricing.items():
            table[str(model)] = entry if isinstance(entry, Price) else Price(**entry)
        return table
    raise ConfigError(f"pricing must be a YAML path or a dict, got {type(pricing).__name__}")


def find_price(table: dict[str, Price], *names: str) -> Price | None:
    """First entry matching one of ``names`` (exact key first, then wildcard keys), or None."""
    for name in names:
        if name in table:
            return table[name]
    for name in names:
        for key, price in table.items():
            if any(ch in key for ch in "*?[") and fnmatch.fnmatchcase(name, key):
                return price
    return None


def known_price(backbone: str, options: dict | None = None) -> Price | None:
    """The Price of a backbone from its name and options without loading it (None when unknown, e.g. a
    litellm model priced only by litellm's own map). Scripted test doubles carry their nominal price."""
    kind, _, rest = backbone.partition(":")
    if kind == "scripted":
        return Price(PRICE_PER_TOKEN * 1e6, PRICE_PER_TOKEN * 1e6)
    if kind == "llamacpp" and rest in PACKAGED_IDS:   # the same weights on llama.cpp: the same price
        kind = rest
    if kind == "openvino" and rest.partition("-")[0] in PACKAGED_IDS:   # the same model on OpenVINO: its price
        kind = rest.partition("-")[0]
    names = [PACKAGED_IDS[kind]] if kind in PACKAGED_IDS else [backbone, rest]
    try:
        return find_price(resolve_pricing((options or {}).get("pricing")), *names)
    except (ConfigError, TypeError):  # a bad pricing option is reported when the backbone loads
        return None
