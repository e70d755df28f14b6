"""jitlab.plumbing.hash_file: the one file hasher (records, game files, adapter weights)."""
from __future__ import annotations

import hashlib

from jitlab.plumbing import hash_file


def test_hash_file_reads_blocks_into_a_new_or_given_digest(tmp_path):
    data = bytes(range(256)) * 5000  # over one 1 MiB block
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    assert hash_file(path).hexdigest() == hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256(b"name")
    assert hash_file(path, digest) is digest
    assert digest.hexdigest() == hashlib.sha256(b"name" + data).hexdigest()
