"""jitlab.llm.hf.internals: the code that subclasses transformers' cache classes runs only on the versions it was
written against; elsewhere the engine falls back to the stock cache (same values) and no prefix reuse."""
import pytest

transformers = pytest.importorskip("transformers")

from jitlab.llm.hf import internals  # noqa: E402


@pytest.fixture
def version(monkeypatch):
    def set_version(v):
        import transformers as current  # the module internals imports now (another test may have swapped it)
        monkeypatch.setattr(current, "__version__", v)
        internals.internals_supported.cache_clear()
    yield set_version
    internals.internals_supported.cache_clear()


def test_the_installed_transformers_is_one_the_fence_was_written_for():
    internals.internals_supported.cache_clear()
    major = int(transformers.__version__.split(".")[0])
    assert internals.internals_supported() == (internals.INTERNALS_TESTED[0] <= major <= internals.INTERNALS_TESTED[1])


def test_an_untested_version_gets_the_stock_cache_and_no_prefix_reuse(version, caplog):
    class Model:  # a TEST DOUBLE: only the config the cache helpers read
        config = transformers.AutoConfig.for_model("llama", num_hidden_layers=2, hidden_size=64,
                                                   num_attention_heads=4, intermediate_size=128)
    version("99.0.0")
    assert not internals.internals_supported() and "outside the versions" in caplog.text
    cache = internals._growing_cache(Model())
    assert type(cache) is transformers.DynamicCache
    assert all(type(layer).__name__ != "GrowingLayer" for layer in cache.layers)
    assert internals._full_attention_only(Model()) is False
    version("5.1.0")
    if internals.internals_supported():
        assert all(type(layer).__name__ == "GrowingLayer" for layer in internals._growing_cache(Model()).layers)
        assert internals._full_attention_only(Model()) is True
