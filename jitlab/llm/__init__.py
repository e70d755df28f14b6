"""Backbones: protocol, registry (``get_backbone``), replay cache, pricing, scripted test doubles."""
from jitlab.llm.base import Backbone, get_backbone

__all__ = ["Backbone", "get_backbone"]
