"""YAML from harness folders (written by a generator, a user or a model: untrusted), parsed with aliases refused.

    data = jitlab.safe_yaml.load(files["description.yaml"])    # yaml.YAMLError when it uses an alias

``yaml.safe_load`` builds no objects it should not, but it does resolve aliases: a few hundred bytes of nested
``&a [*b, *b, ...]`` anchors become a structure whose text form (``str``, ``json.dumps``, what the harness card,
retrieval and the dashboard make of a description) grows exponentially, until memory runs out in the trusted
parent. Harness files have no use for aliases, so any ``*name`` (and so any ``<<: *name`` merge) is refused as a
``yaml.YAMLError`` (a ComposerError with its line), which every caller already reports as a file that does not
parse. Without aliases a document's objects are at most as large as its text.
"""
from __future__ import annotations

import yaml

__all__ = ["load"]


class _NoAliases(yaml.SafeLoader):
    """SafeLoader that refuses every alias event."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"found the alias *{event.anchor}: YAML aliases are not "
                                              "allowed in harness files (they can expand without bound); write the "
                                              "value out", event.start_mark)
        return super().compose_node(parent, index)


def load(text: str):
    """``yaml.safe_load(text)`` with aliases refused (yaml.YAMLError)."""
    return yaml.load(text, Loader=_NoAliases)  # a SafeLoader: builds plain data only
