"""Pricing tables: YAML loading, lookup order, wildcard keys, clear errors."""
import pytest

from jitlab.errors import ConfigError
from jitlab.llm.hf import EMBEDDED_ID
from jitlab.llm.pricing import (
    Price,
    default_pricing,
    find_price,
    load_pricing,
    resolve_pricing,
)


def test_default_prices_the_embedded_model():
    price = default_pricing()[EMBEDDED_ID]
    assert price.input_per_mtok > 0 and price.output_per_mtok > 0
    assert price.cost(1_000_000, 0) == pytest.approx(price.input_per_mtok)


def test_user_file_overrides_defaults_and_wildcards(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(f"{EMBEDDED_ID}: {{input_per_mtok: 5, output_per_mtok: 7}}\n"
                    "'litellm:openai/*': {input_per_mtok: 1, output_per_mtok: 2}\n")
    table = resolve_pricing(str(path))
    assert table[EMBEDDED_ID] == Price(5, 7)
    assert find_price(table, "litellm:openai/anything") == Price(1, 2)
    assert find_price(table, "litellm:anthropic/x") is None
    assert Price(1, 2).cost(1000, 500) == pytest.approx((1000 * 1 + 500 * 2) / 1e6)


@pytest.mark.parametrize("text", ["- not a mapping\n", "m: {input_per_mtok: 1, price: 2}\n", "m: {input_per_mtok: abc}\n", "m: [\n"])
def test_malformed_files_say_what_is_wrong(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="pricing file"):
        load_pricing(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_pricing(tmp_path / "nope.yaml")
