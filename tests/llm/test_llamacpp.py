"""llamacpp backend: the embedded GGUF on llama.cpp in an engine process of its own.

Tests that need llama-cpp-python are skipped when it is not installed (it is an optional extra that builds from
source); the test process never imports llama_cpp itself (it runs in the engine process only). One engine (about
1-2 s to start) serves the module's tests; replies are a few tokens long.
"""
import os
import subprocess
import sys
import textwrap
import threading
import time
from importlib.util import find_spec

import pytest

from jitlab.errors import ConfigError, InfraError, UnknownName
from jitlab.llm import get_backbone, llamacpp
from jitlab.llm.base import check_name, weights_of

needs_llamacpp = pytest.mark.skipif(find_spec("llama_cpp") is None,
                                    reason='llama-cpp-python not installed (pip install "jitlab[llamacpp]")')
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
OTHERS = [[{"role": "user", "content": text}] for text in
          ("Write a haiku about the sea.", "List three fruits and their colours.", "Describe a cat in two sentences.")]
OPTIONS = {"n_ctx": 1024, "max_batch": 4}     # a small KV cache: 5 sequences of 1,024 tokens


def test_names_are_registered_without_loading_anything():
    check_name("llamacpp:embedded")
    check_name("llamacpp:/models/x.gguf")
    with pytest.raises(UnknownName, match="llamacpp:embedded"):
        check_name("llamacpp")
    assert "SmolLM2" in weights_of("llamacpp:embedded") and "llama.cpp" in weights_of("llamacpp:embedded")
    assert weights_of("llamacpp:/m/x.gguf") == "GGUF file /m/x.gguf, run by llama.cpp"


def test_retyped_names_are_their_own_backbone_ids():
    check_name("llamacpp:embedded-q8_0")
    assert "re-typed to Q8_0" in weights_of("llamacpp:embedded-q8_0")
    path, model_id, hf_id, source = llamacpp._resolve("embedded-q8_0")
    assert model_id == "llamacpp:smollm2-135m-instruct-q8_0" and path.name.endswith("-q8_0.gguf")
    assert source == llamacpp._resolve("embedded")[0] and hf_id == llamacpp._resolve("embedded")[2]
    with pytest.raises(ConfigError, match="-q8_0"):
        get_backbone("llamacpp:embedded-q9")


def test_missing_llama_cpp_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(llamacpp, "find_spec", lambda name: None)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r'pip install "jitlab\[llamacpp\]"') as err:
        get_backbone(f"llamacpp:{tmp_path / 'm.gguf'}")
    assert "\n" not in str(err.value) and "GGML_NATIVE=OFF" in str(err.value)


def test_bad_path_and_unknown_option(tmp_path):
    with pytest.raises(ConfigError, match="no GGUF file"):
        get_backbone(f"llamacpp:{tmp_path / 'nope.gguf'}")
    with pytest.raises(ConfigError, match="max_btach"):
        get_backbone("llamacpp:embedded", max_btach=3)


def test_a_bad_wait_policy_is_a_config_error():
    with pytest.raises(ConfigError, match="wait_policy='spin' must be passive or active"):
        get_backbone("llamacpp:embedded", wait_policy="spin")


@needs_llamacpp
def test_the_engine_process_gets_the_wait_policy_not_the_callers(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")   # what importing jitlab.llm.hf sets in the caller
    llm = get_backbone("llamacpp:embedded", wait_policy="active", **OPTIONS)
    try:
        llm.chat(QUESTION, max_new_tokens=1)
        env = open(f"/proc/{_pid(llm)}/environ", "rb").read().split(b"\0")
        assert b"OMP_WAIT_POLICY=ACTIVE" in env and b"OMP_WAIT_POLICY=PASSIVE" not in env
    finally:
        llm.close()


@needs_llamacpp
def test_a_file_that_is_not_gguf_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file" * 100)
    llm = get_backbone(f"llamacpp:{bad}")
    with pytest.raises(ConfigError, match="could not load") as err:
        llm.chat(QUESTION, max_new_tokens=2)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def smol():
    llm = get_backbone("llamacpp:embedded", **OPTIONS)
    yield llm
    llm.close()


def _pid(llm) -> int:
    return llamacpp._ENGINES[(*llm._key, 0)].proc.pid


@needs_llamacpp
def test_chat_accounting_and_id(smol):
    reply = smol.chat(QUESTION, max_new_tokens=8)
    assert smol.id == "llamacpp:smollm2-135m-instruct"
    assert reply.text and reply.prompt_tokens == len(smol.prompt_ids(QUESTION)) > 10
    assert 0 < reply.completion_tokens <= 8 and reply.cost > 0
    assert 0 <= reply.queue_s and 0 < reply.compute_s <= reply.latency_s
    assert "llama_cpp" not in sys.modules              # llama.cpp runs in the engine process only


@needs_llamacpp
def test_greedy_alone_equals_batched_with_three_others(smol):
    alone = smol.chat(QUESTION, max_new_tokens=16)
    smol.steps()
    replies: list = [None] * 4
    barrier = threading.Barrier(4)

    def call(i):
        barrier.wait()
        replies[i] = smol.chat(([QUESTION] + OTHERS)[i], max_new_tokens=16)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(smol.steps()) >= 3              # the requests really shared steps
    assert replies[0].text == alone.text and replies[0].completion_tokens == alone.completion_tokens
    assert all(r.text for r in replies)


@needs_llamacpp
def test_prefix_reuse_gives_the_same_reply(smol):
    first = smol.chat(QUESTION, max_new_tokens=6)
    again = smol.chat(QUESTION, max_new_tokens=6)
    assert again.reused_tokens == again.prompt_tokens - 1 and again.text == first.text
    cold = get_backbone("llamacpp:embedded", prefix_reuse=False, **OPTIONS)
    try:
        assert cold.chat(QUESTION, max_new_tokens=6).text == first.text
    finally:
        cold.close()


@needs_llamacpp
def test_max_tokens_and_stop_strings(smol):
    full = smol.chat(QUESTION, max_new_tokens=20)
    assert smol.chat(QUESTION, max_tokens=3).completion_tokens == 3
    words = full.text.split()
    assert len(words) >= 3, full.text
    stop = " " + words[2]
    cut = smol.chat(QUESTION, max_new_tokens=20, stop=[stop, "never-appears"])
    assert cut.text == full.text[:full.text.index(stop)]
    assert cut.completion_tokens < full.completion_tokens


@needs_llamacpp
def test_sampling_is_seeded_per_request(smol):
    a = smol.chat(QUESTION, max_new_tokens=12, temperature=1.5, seed=7)
    b = smol.chat(QUESTION, max_new_tokens=12, temperature=1.5, seed=7)
    assert a.text == b.text
    texts = {smol.chat(QUESTION, max_new_tokens=12, temperature=1.5, seed=s).text for s in range(4)}
    assert len(texts) > 1


@needs_llamacpp
def test_score_ranks_and_equals_a_plain_forward_pass(smol):
    good, bad = "The capital of France is Paris.", "Bananas are purple sharks."
    scores = smol.score(QUESTION, [good, bad])
    assert scores[0] > scores[1]
    prompt = smol.prompt_ids(QUESTION)
    for text, score in zip((good, bad), scores):
        reply = smol.reply_ids(text)
        direct = sum(smol.token_logprobs(prompt + reply)[len(prompt) - 1:])
        # candidates decoded together in one batch take llama.cpp's batched matrix path, whose float
        # sums differ from the single sequence's by ~3e-4 relative (measured); choices are compared in
        # benchmarks/replay.py
        assert score == pytest.approx(direct, rel=1e-3)
    assert smol.score(QUESTION, []) == []
    assert set(smol.last_score_timing()) == {"queue_s", "compute_s", "reused", "prompt_tokens"}


@needs_llamacpp
def test_prompt_rendering_equals_hf(smol):
    """The prompt text equals transformers' apply_chat_template on the same GGUF, and llama.cpp's tokens equal hf's."""
    transformers = pytest.importorskip("transformers")
    from jitlab.llm import hf
    path = hf.embedded_gguf_path()
    converted = hf.gguf_folder(path)
    source, extra = (converted, {}) if (converted / "DONE").is_file() else (path.parent, {"gguf_file": path.name})
    tok = transformers.AutoTokenizer.from_pretrained(source, local_files_only=True, **extra)
    conversations = [QUESTION,
                     [{"role": "system", "content": "You play a text game."}, *QUESTION,
                      {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Spain?"}],
                     [*QUESTION, {"role": "assistant", "content": "It is"}]]     # continued, not closed
    for messages in conversations:
        cont = messages[-1]["role"] == "assistant"
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=not cont,
                                       continue_final_message=cont)
        assert llamacpp.render(tok.chat_template, messages, tok.bos_token, tok.eos_token) == text
        assert smol.prompt_ids(messages) == tok(text, add_special_tokens=False)["input_ids"]


@needs_llamacpp
def test_a_retyped_copy_is_written_on_first_use_and_serves(monkeypatch, tmp_path):
    monkeypatch.setenv("JITLAB_HOME", str(tmp_path))
    llm = get_backbone("llamacpp:embedded-q8_0", **OPTIONS, threads=1)
    try:
        assert not llm.gguf.exists()
        reply = llm.chat(QUESTION, max_new_tokens=4)
        assert llm.gguf.is_file() and llm.gguf.is_relative_to(tmp_path) and reply.completion_tokens > 0
        assert llm.id == "llamacpp:smollm2-135m-instruct-q8_0" and reply.cost > 0
    finally:
        llm.close()


@needs_llamacpp
def test_workers_take_calling_threads_in_turn_and_agree(smol):
    alone = smol.chat(QUESTION, max_new_tokens=12).text
    llm = get_backbone("llamacpp:embedded", **OPTIONS, threads=1, workers=2)
    replies, workers = [None] * 4, [None] * 4

    def call(i):
        replies[i] = llm.chat(QUESTION, max_new_tokens=12).text
        workers[i] = llm._local.worker

    try:
        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(workers) == [0, 0, 1, 1] and replies == [alone] * 4
        assert {key[-1] for key in llamacpp._ENGINES if key[:-1] == llm._key} == {0, 1}
    finally:
        llm.close()
    assert not any(key[:-1] == llm._key for key in llamacpp._ENGINES)


@needs_llamacpp
def test_close_stops_the_engine_and_a_later_call_restarts_it():
    llm = get_backbone("llamacpp:embedded", **OPTIONS, threads=1)
    llm.chat(QUESTION, max_new_tokens=2)
    proc = llamacpp._ENGINES[(*llm._key, 0)].proc
    llm.close()
    assert proc.poll() is not None
    assert llm.chat(QUESTION, max_new_tokens=2).completion_tokens > 0
    llm.close()


@needs_llamacpp
def test_a_crashed_engine_fails_its_calls_with_one_line_and_restarts():
    llm = get_backbone("llamacpp:embedded", **OPTIONS, threads=1)
    llm.chat(QUESTION, max_new_tokens=2)
    pid, errors = _pid(llm), []

    def long_call():
        try:
            llm.chat(QUESTION, max_new_tokens=400)
        except InfraError as exc:
            errors.append(exc)

    t = threading.Thread(target=long_call)
    t.start()
    time.sleep(0.5)
    os.kill(pid, 9)
    t.join(timeout=30)
    assert not t.is_alive() and len(errors) == 1
    assert "exited with code -9" in str(errors[0]) and "\n" not in str(errors[0])
    assert llm.chat(QUESTION, max_new_tokens=2).completion_tokens > 0       # a new engine
    assert _pid(llm) != pid
    llm.close()


@needs_llamacpp
def test_the_engine_exits_when_its_parent_dies():
    script = textwrap.dedent("""
        import os
        from jitlab.llm import get_backbone, llamacpp
        llm = get_backbone("llamacpp:embedded", n_ctx=256, max_batch=1, threads=1)
        llm.chat([{"role": "user", "content": "hi"}], max_new_tokens=1)
        print(llamacpp._ENGINES[(*llm._key, 0)].proc.pid, flush=True)
        os._exit(0)      # no atexit, no close(): the engine only sees its input close
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()      # a zombie has exited (its new parent has not reaped it yet)
    except FileNotFoundError:
        return False
