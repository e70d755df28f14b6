"""The hf engine's prefix cache: keys/values of recent sequences, looked up by their longest common token prefix
(LRU under a byte budget). See the package docstring, "Prefix reuse"."""
from __future__ import annotations

from collections import OrderedDict


class _PrefixCache:
    """Key/value caches of recent token sequences, for prefix reuse; LRU-evicted under a byte cap.

    No conversation key: a prompt reuses the longest common prefix (in token ids) with ANY stored
    sequence, which is its own episode's previous call when the harness's prompt grows by appending,
    and at least the shared system prompt of another episode otherwise. Entries hold per-layer
    ``(keys, values)`` of shape [1, kv_heads, tokens, head_dim]; a reuse slices the first tokens of
    an entry (a view, never written: ``DynamicCache.update`` concatenates into new tensors). Storing a
    sequence that reused at least half of its source entry replaces that entry (an episode's
    previous prompt is dead once its next one is stored), so an episode holds about one entry.
    Used only under the engine's lock."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.bytes = max_bytes, 0
        self.entries: OrderedDict[int, tuple] = OrderedDict()   # key -> (ids tensor, layers, bytes)
        self._next = 0

    def lookup(self, ids: list[int], limit: int) -> tuple[int, int | None]:
        """(tokens reusable, entry key) for the longest common prefix of ``ids[:limit]`` with a stored sequence."""
        import torch
        best, best_key = 0, None
        if limit <= 0 or not self.entries:
            return 0, None
        query = torch.tensor(ids[:limit])
        for key, (stored, _, _) in self.entries.items():
            n = min(len(stored), len(query))
            if n <= best:
                continue
            differ = (stored[:n] != query[:n]).nonzero()
            common = int(differ[0, 0]) if len(differ) else n
            if common > best:
                best, best_key = common, key
        return best, best_key

    def layers(self, key: int, n: int) -> list[tuple]:
        self.entries.move_to_end(key)
        return [(k[:, :, :n], v[:, :, :n]) for k, v in self.entries[key][1]]

    def store(self, ids: list[int], layers: list[tuple], source: int | None = None, reused: int = 0) -> None:
        import torch
        if source in self.entries and 2 * reused >= len(self.entries[source][0]):
            self.bytes -= self.entries.pop(source)[2]
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if size > self.max_bytes:
            return
        self.entries[self._next] = (torch.tensor(ids), layers, size)
        self._next += 1
        self.bytes += size
        while self.bytes > self.max_bytes:
            self.bytes -= self.entries.popitem(last=False)[1][2]

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0
