"""Replay cache exactness through the runtime's LLMHandle: a second identical call is a hit,
flagged cached=True, with the same text and the ORIGINAL call's tokens and cost."""
import json

from jitlab.llm.cache import CacheQuarantined, ReplayCache, cache_key, default_cache
from jitlab.llm.scripted import ScriptedBackbone
from jitlab.runtime import LLMHandle

MESSAGES = [{"role": "user", "content": "Options:\n- go east\n- take key"}]


def _handle(tmp_path, backbone, records):
    return LLMHandle(backbone, cache=ReplayCache(tmp_path / "replay.sqlite"), on_call=records.append, seed=3)


def test_second_call_is_an_exact_hit(tmp_path):
    backbone, records = ScriptedBackbone(lambda m: "Action: take key", name="cache-test"), []
    llm = _handle(tmp_path, backbone, records)
    first = llm.chat(MESSAGES, temperature=0)
    second = llm.chat(MESSAGES, temperature=0)
    assert backbone.calls == 1
    assert not first.cached and second.cached
    assert (second.text, second.prompt_tokens, second.completion_tokens, second.cost) == \
           (first.text, first.prompt_tokens, first.completion_tokens, first.cost)
    assert [r["cached"] for r in records] == [False, True]
    assert records[1]["cost"] == first.cost > 0
    assert llm.cost == 2 * first.cost        # a hit is charged what the original call cost


def test_hit_survives_a_new_process_handle(tmp_path):
    backbone = ScriptedBackbone(lambda m: "Action: go east", name="cache-test")
    _handle(tmp_path, backbone, []).chat(MESSAGES)
    again = _handle(tmp_path, ScriptedBackbone(lambda m: "DIFFERENT", name="cache-test"), []).chat(MESSAGES)
    assert again.cached and again.text == "Action: go east"


def test_key_covers_backbone_messages_params_and_seed():
    base = cache_key("b", MESSAGES, {"t": 0}, 0)
    assert base == cache_key("b", MESSAGES, {"t": 0}, 0)
    assert len({base, cache_key("c", MESSAGES, {"t": 0}, 0), cache_key("b", MESSAGES[:0], {"t": 0}, 0),
                cache_key("b", MESSAGES, {"t": 1}, 0), cache_key("b", MESSAGES, {"t": 0}, 1)}) == 5


def test_miss_on_different_params(tmp_path):
    backbone = ScriptedBackbone(lambda m: "x", name="cache-test")
    llm = _handle(tmp_path, backbone, [])
    llm.chat(MESSAGES, max_new_tokens=8)
    assert not llm.chat(MESSAGES, max_new_tokens=9).cached and backbone.calls == 2


def test_scores_are_cached(tmp_path):
    backbone = ScriptedBackbone(lambda m: "x", name="cache-test")
    records = []
    llm = _handle(tmp_path, backbone, records)
    first = llm.score(MESSAGES, ["take key", "dance"])
    assert llm.score(MESSAGES, ["take key", "dance"]) == first
    assert [r["cached"] for r in records] == [False, True]


def test_cache_off(monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE", "off")
    assert default_cache() is None


# -- a damaged cache is infrastructure, never the harness's failure (issue 17, case 4) ----------------------
def _fill(path, n=300):
    cache = ReplayCache(path)
    backbone = ScriptedBackbone(lambda m: "Action: look " + "x" * 200, name="cache-fill")
    llm = LLMHandle(backbone, cache=cache)
    for i in range(n):
        llm.chat([{"role": "user", "content": f"fill {i}"}])
    cache._db.close()


def _damage_pages(path):
    raw = bytearray(path.read_bytes())
    assert len(raw) > 8 * 4096, "the cache spans several pages"
    raw[4096:] = b"\xa5" * (len(raw) - 4096)          # keep the header page, garble every other page
    path.write_bytes(bytes(raw))


def _toy_run(out, **kw):
    from jitlab.runner import RunConfig, run
    return run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-hash", limit=3, out=str(out),
                         quiet=True, **kw))


def test_damaged_cache_is_quarantined_and_the_run_is_not_blamed(tmp_path, _isolated_home):
    import pytest

    from jitlab.store import load
    path = _isolated_home / "replay.sqlite"
    _fill(path)
    _damage_pages(path)
    damaged = path.read_bytes()
    with pytest.warns(CacheQuarantined, match=r"replay\.sqlite is damaged .*moved to .*replay\.corrupt-") as caught:
        out = _toy_run(tmp_path / "r")
    assert len([w for w in caught if issubclass(w.category, CacheQuarantined)]) == 1     # said once
    eps = load(out)["episodes"]
    assert set(eps["status"]) == {"ok"} and len(eps) == 3                              # no harness_error
    moved = list(_isolated_home.glob("replay.corrupt-*.sqlite"))
    assert len(moved) == 1 and moved[0].read_bytes() == damaged                          # kept, unchanged
    again = load(_toy_run(tmp_path / "again"))                                           # the fresh cache works
    assert again["calls"]["cached"].all()


def test_cache_file_with_a_bad_header_is_replaced(tmp_path):
    import pytest
    path = tmp_path / "replay.sqlite"
    path.write_bytes(b"this is not SQLite at all" * 50)
    with pytest.warns(CacheQuarantined, match="damaged"):
        cache = ReplayCache(path)
    llm = LLMHandle(ScriptedBackbone(lambda m: "x", name="cache-test"), cache=cache)
    assert not llm.chat(MESSAGES).cached and llm.chat(MESSAGES).cached
    assert cache.quarantined.read_bytes() == b"this is not SQLite at all" * 50



def test_a_second_process_does_not_quarantine_the_fresh_cache_of_the_first(tmp_path):
    import pytest
    path = tmp_path / "replay.sqlite"
    _fill(path, n=300)
    first, second = ReplayCache(path), ReplayCache(path)       # two processes sharing $JITLAB_HOME
    _damage_pages(path)                                          # (same inode: both see the damage)
    with pytest.warns(CacheQuarantined, match="moved to"):
        assert first.get("no-such-key") is None
    fresh = path.stat().st_ino
    first.put("k", [1.0], kind="score")
    assert second.get("k", kind="score") == [1.0]                 # the second notices, moves nothing, reads it
    assert path.stat().st_ino == fresh and first.get("k", kind="score") == [1.0]
    assert len(list(tmp_path.glob("replay.corrupt-*.sqlite"))) == 1


# -- a lock held by a sibling process is neither damage nor a full disk (issue 27, item 12) -----------------
_WRITER = """
import json, sys, time, warnings
from pathlib import Path
from jitlab.llm.cache import ReplayCache
folder, me, files, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
(folder / f"ready-{me}").touch()
while not (folder / "go").exists():
    time.sleep(0.005)
report = {"disabled": [], "skipped": 0, "warnings": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for f in range(files):           # every file is fresh: the processes race to set it up, then write at once
        cache = ReplayCache(folder / f"replay-{f}.sqlite")
        for i in range(n):
            cache.put(f"{me}-{i}", [float(i)], kind="score")
            cache.get(f"{me - 1}-{i}", kind="score")
        report["disabled"] += [cache.disabled] if cache.disabled else []
        report["skipped"] += getattr(cache, "skipped", 0)
    report["warnings"] = [str(w.message) for w in caught]
print(json.dumps(report))
"""


def test_several_processes_writing_fresh_caches_at_once_keep_them_on(tmp_path):
    """Issue 27 item 12: processes opening and writing one fresh replay.sqlite at the same moment (the notebooks of
    a batch, a grid's runs sharing $JITLAB_HOME) now and then turned it off with ``CacheQuarantined: replay cache
    ... failed (OperationalError: database is locked); continuing without the cache ... (free space or fix its
    permissions ...)``: 6 processes x 20 fresh files, the first file held (as while its creator sets it up) by this
    process when they start. Every process keeps every cache on, and every write is there."""
    import sqlite3
    import subprocess
    import sys
    import time
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(me), "20", "10"],
                              stdout=subprocess.PIPE, text=True) for me in range(6)]
    deadline = time.time() + 60
    while time.time() < deadline and len(list(tmp_path.glob("ready-*"))) < 6:
        time.sleep(0.01)
    creator = sqlite3.connect(tmp_path / "replay-0.sqlite", isolation_level=None)
    creator.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
    creator.execute("BEGIN IMMEDIATE")
    (tmp_path / "go").touch()
    time.sleep(1.0)
    creator.execute("COMMIT")
    creator.close()
    reports = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert reports == [{"disabled": [], "skipped": 0, "warnings": []}] * 6, reports
    for f in range(20):
        cache = ReplayCache(tmp_path / f"replay-{f}.sqlite")
        assert all(cache.get(f"{me}-{i}", kind="score") == [float(i)] for me in range(6) for i in range(10))


def test_a_cache_locked_by_a_sibling_while_it_is_set_up_waits_and_stays_on(tmp_path):
    """Issue 27 item 12, deterministically: while another process holds the write lock of a fresh (not yet WAL)
    cache file, ``ReplayCache(path)`` failed at once (SQLite calls no busy handler for the switch to WAL) and
    turned the cache off blaming space or permissions. It waits for the lock and stays on."""
    import subprocess
    import sys
    import warnings
    path = tmp_path / "replay.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, kind TEXT, value TEXT)')\n"
        "db.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(1.5); db.execute('COMMIT')"),
        str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = ReplayCache(path)
        cache.put("k", [1.0], kind="score")
    holder.wait(timeout=60)
    assert cache.disabled is None and cache.skipped == 0 and not caught, [str(w.message) for w in caught]
    assert cache.get("k", kind="score") == [1.0] and ReplayCache(path).get("k", kind="score") == [1.0]


def test_a_call_that_stays_locked_skips_the_cache_which_stays_on(tmp_path, monkeypatch):
    """Past ``BUSY_WAIT_S`` a call goes without the cache, with one warning that names the lock (not space or
    permissions); once the sibling lets go, the same cache object stores and replays again."""
    import subprocess
    import sys
    import warnings

    import jitlab.llm.cache as cache_module
    monkeypatch.setattr(cache_module, "BUSY_WAIT_S", 0.3)
    path = tmp_path / "replay.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, kind TEXT, value TEXT)')\n"
        "db.execute('BEGIN IMMEDIATE'); print('held', flush=True); sys.stdin.readline(); db.execute('COMMIT')"),
        str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = ReplayCache(path)
        cache.put("k", [1.0], kind="score")
    assert cache.disabled is None and cache.skipped == 2
    assert len(caught) == 1 and "locked by another process" in str(caught[0].message)
    assert "space" not in str(caught[0].message) and "permission" not in str(caught[0].message)
    holder.communicate("\n", timeout=60)
    cache.put("k", [1.0], kind="score")
    assert cache.get("k", kind="score") == [1.0] and cache.skipped == 2


def test_a_backbone_whose_weights_changed_under_the_same_id_misses(tmp_path):
    """A retrained adapter keeps its folder (its id) but not its weights: the key names it by ``cache_id``
    (jitlab.llm.hf sets it to the id plus the adapters' weights hash), so the old completions are not replayed."""
    backbone = ScriptedBackbone(lambda m: "x", name="cache-test")
    backbone.cache_id = "cache-test@weights-1"
    llm = _handle(tmp_path, backbone, [])
    llm.chat(MESSAGES)
    assert llm.chat(MESSAGES).cached
    backbone.cache_id = "cache-test@weights-2"
    assert not llm.chat(MESSAGES).cached and backbone.calls == 2


def test_the_weights_hash_covers_every_adapter_in_the_chain(tmp_path):
    from jitlab.llm.adapters import weights_sha, write_base
    below, top = tmp_path / "stage1", tmp_path / "stage2"
    for folder in (below, top):
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
        (folder / "adapter_model.safetensors").write_bytes(b"weights of " + folder.name.encode())
    write_base(top, "embedded", ["../stage1"])
    first = weights_sha(top)
    assert weights_sha(top) == first and len(first) == 16
    (below / "adapter_model.safetensors").write_bytes(b"stage1 trained again")
    second = weights_sha(top)
    (top / "adapter_model.safetensors").write_bytes(b"stage2 trained again")
    assert len({first, second, weights_sha(top)}) == 3


def test_a_lazy_hf_adapter_backbone_keys_the_cache_by_its_weights_without_loading(tmp_path):
    from jitlab.llm.adapters import write_base
    from jitlab.llm.lazy import LazyBackbone
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    write_base(adapter, "embedded")
    (adapter / "adapter_model.safetensors").write_bytes(b"weights, first training")
    first = LazyBackbone(f"hf:{adapter}", {})
    (adapter / "adapter_model.safetensors").write_bytes(b"weights, trained again")
    second = LazyBackbone(f"hf:{adapter}", {})
    assert first.id == second.id and first.cache_id != second.cache_id and first._backbone is None
    assert LazyBackbone("scripted:pick-first", {}).cache_id == "scripted:pick-first"


def test_hf_folder_is_the_folder_of_an_hf_name_only():
    from jitlab.llm.base import hf_folder
    assert hf_folder("hf:runs/p/stage3/adapter") == "runs/p/stage3/adapter"
    assert hf_folder("hf:models/gemma#model.gguf") == "models/gemma"
    assert hf_folder("openvino:embedded") is None and hf_folder("embedded") is None
