"""jitlab/memory.py on glibc: what each remedy hands back, each in a fresh process (the mmap threshold is per process)."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (Linux)")

# glibc's dynamic threshold: after a 20 MB block is freed, blocks up to 20 MB come from the heap; small objects
# allocated between the 2 MB blocks pin the heap's top, so freeing the large ones does not shrink it
SCRIPT = """
import json, sys
from jitlab import memory
def rss():
    return next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmRSS"))
if sys.argv[1] == "steady":
    assert memory.steady_heap()
pad = bytearray(20 << 20)
del pad
big, small = [], []
for _ in range(150):
    big.append(bytearray(b"x") * (2 << 20))
    small.append(bytearray(1000))          # past pymalloc: from the heap too
full = rss()
big.clear()
freed = rss()
memory.trim()
print(json.dumps({"full": full, "freed": freed, "trimmed": rss()}))
"""


def _measure(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_trim_hands_back_the_free_heap_the_default_threshold_keeps():
    m = _measure("default")
    assert m["full"] - m["freed"] < 100          # glibc's defaults keep the freed 300 MB
    assert m["freed"] - m["trimmed"] > 200       # malloc_trim hands it back


def test_steady_heap_returns_large_blocks_as_they_are_freed():
    m = _measure("steady")
    assert m["full"] - m["freed"] > 200          # each 2 MB block was its own mapping
