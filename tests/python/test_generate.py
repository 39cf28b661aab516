"""rlx.LLM against `rlx generate` / `rlx chat` on the default model
(SmolLM2-135M-Instruct Q4_1) and the tiny test model, on the CPU."""

import _thread
import json
import signal
import threading
import time

import pytest

import rlx
from conftest import DATA, SMOLLM2, TINY_LLAMA, need, run_cli, ticks_while

PROMPT = "The capital of France is"


def cli_generate(model, *args):
    return run_cli("generate", "--threads", "1", "--device", "cpu", "--model", str(model), *args)


def test_greedy_text_equals_rlx_generate(smollm2):
    for prompt, n in ((PROMPT, 16), ("Once upon a time, in a land far away,", 24)):
        want = cli_generate(SMOLLM2, "-n", str(n), "--prompt", prompt)
        g = smollm2.generate(prompt, max_tokens=n)
        assert g.text + "\n" == want
        assert len(g.text) > 10
        assert g.finish_reason == "length" and g.completion_tokens == len(g.token_ids) == n
        assert g.prompt_tokens == len(smollm2.tokenizer.encode(prompt, add_special=True))


def test_greedy_ids_equal_the_reference(smollm2):
    ref = json.loads((DATA / "smollm2_reference.json").read_text())
    g = smollm2.generate(ref["prompt"], max_tokens=6)
    assert g.token_ids == ref["generated_ids"][:6]
    assert g.prompt_tokens == len(ref["prompt_ids"])
    # Token ids in, the same reply out.
    assert smollm2.generate(ref["prompt_ids"], max_tokens=6).token_ids == g.token_ids


def test_tiny_model_equals_rlx_generate_and_its_reference(tiny):
    ids = [1, 45, 96, 173, 17]
    out = cli_generate(TINY_LLAMA, "-n", "8", "--ignore-eos", "--prompt-ids", ",".join(map(str, ids)))
    want = [int(x) for x in out.strip().split(",")]
    g = tiny.generate(ids, max_tokens=8, ignore_eos=True)
    assert g.token_ids == want and len(want) == 8
    ref = json.loads((DATA / "tiny_llama_reference.json").read_text())
    n = len(ref["generated_ids"])
    assert tiny.generate(ref["prompt_ids"], max_tokens=n, ignore_eos=True).token_ids == ref["generated_ids"]
    # The prompt text tokenizes as the reference did (BOS first: the model asks for it).
    assert tiny.tokenizer.encode(ref["prompt"], add_special=True) == ref["prompt_ids"]
    assert tiny.generate(ref["prompt"], max_tokens=n, ignore_eos=True).token_ids == ref["generated_ids"]


def test_stream_pieces_concatenate_to_the_text(smollm2, tiny):
    for llm, prompt, kw in ((smollm2, PROMPT, {}), (tiny, [1, 45, 96, 173, 17], {"ignore_eos": True})):
        whole = llm.generate(prompt, max_tokens=20, **kw)
        stream = llm.generate(prompt, max_tokens=20, stream=True, **kw)
        assert isinstance(stream, rlx.GenerationStream)
        assert stream.result is None
        pieces = list(stream)
        assert len(pieces) >= 5 and all(isinstance(p, str) and p for p in pieces)
        assert "".join(pieces) == whole.text
        assert stream.result.token_ids == whole.token_ids
        assert stream.result.finish_reason == whole.finish_reason
        assert list(stream) == []  # ended


def test_stop_strings_and_ids(smollm2):
    full = smollm2.generate(PROMPT, max_tokens=16)
    assert " answer" in full.text
    g = smollm2.generate(PROMPT, max_tokens=16, stop=[" answer", "zzz"])
    assert g.finish_reason == "stop" and g.text == full.text[: full.text.index(" answer")]
    pieces = list(smollm2.generate(PROMPT, max_tokens=16, stop=" answer", stream=True))
    assert "".join(pieces) == g.text
    k = next(i for i in range(3, 16) if full.token_ids[i] not in full.token_ids[:i])  # its first time
    g = smollm2.generate(PROMPT, max_tokens=16, stop_ids=[full.token_ids[k]])
    assert g.finish_reason == "stop" and g.token_ids == full.token_ids[: k + 1]


def test_chat_equals_rlx_chat(smollm2):
    question = "What is the capital of France?"
    want = run_cli("chat", "--threads", "1", "--device", "cpu", "--ctx-size", "512", "-n", "24", "--model",
                   str(SMOLLM2), stdin=question + "\n")
    g = smollm2.chat([{"role": "user", "content": question}], max_tokens=24)
    assert g.text + "\n" == want
    assert "Paris" in g.text
    assert g.finish_reason in ("eos", "stop")  # ended at the end of turn, before 24 tokens
    assert g.completion_tokens < 24
    text = smollm2.apply_chat_template([{"role": "user", "content": question}])
    assert "<|im_start|>user\n" + question in text and text.endswith("<|im_start|>assistant\n")
    pieces = list(smollm2.chat([{"role": "user", "content": question}], max_tokens=24, stream=True))
    assert "".join(pieces) == g.text


def test_generate_batch_equals_each_alone(tiny):
    prompts = ["Once upon a time", [1, 45, 96, 173, 17], "The dog", [1, 300], "A cat sat on the mat and"]
    for kw in ({}, {"temperature": 0.9, "top_k": 20, "seed": 5}):
        got = tiny.generate_batch(prompts, max_tokens=10, ignore_eos=True, **kw)  # 5 prompts over 3 slots
        assert [g.token_ids for g in got] == [tiny.generate(p, max_tokens=10, ignore_eos=True, **kw).token_ids
                                              for p in prompts]
        assert len({tuple(g.token_ids) for g in got}) == len(prompts)
    assert tiny.generate_batch([], max_tokens=3) == []


def test_seeded_sampling_repeats(smollm2):
    a = smollm2.generate(PROMPT, max_tokens=12, temperature=0.9, top_p=0.95, seed=11)
    b = smollm2.generate(PROMPT, max_tokens=12, temperature=0.9, top_p=0.95, seed=11)
    assert a.token_ids == b.token_ids and a.seed == 11
    c = smollm2.generate(PROMPT, max_tokens=12, temperature=0.9, top_p=0.95)
    d = smollm2.generate(PROMPT, max_tokens=12, temperature=0.9, top_p=0.95, seed=c.seed)
    assert c.token_ids == d.token_ids  # the random seed is reported
    greedy = smollm2.generate(PROMPT, max_tokens=12)
    penalised = smollm2.generate(PROMPT, max_tokens=12, repeat_penalty=1.5, repeat_last_n=-1,
                                 presence_penalty=1.0, frequency_penalty=1.0)
    assert penalised.token_ids != greedy.token_ids


def test_tokenizer_round_trip(smollm2):
    tok = smollm2.tokenizer
    text = "Hello, world! Ünïcödé 数字"
    ids = tok.encode(text)
    assert ids and tok.decode(ids) == text
    assert tok.vocab_size == len(tok) == smollm2.vocab_size == 49152
    assert tok.token_id("<|im_end|>") == smollm2.eos_id == tok.eos_id
    assert tok.encode("<|im_end|>") != [tok.eos_id]  # user text is never a control token
    assert tok.encode("<|im_end|>", parse_special=True) == [tok.eos_id]
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])


def test_tensor_parallel_over_host_ranks_equals_rlx_generate():
    # SmolLM2's 9 heads and 3 KV heads split over 3 ranks (threads on the CPU).
    want = cli_generate(SMOLLM2, "-n", "12", "--prompt", PROMPT)
    split = rlx.LLM(need(SMOLLM2), device="cpu", threads=3, max_sequences=1, tensor_parallel=3)
    assert split.generate(PROMPT, max_tokens=12).text + "\n" == want
    with pytest.raises(rlx.Error, match="num_attention_heads 9 is not a multiple of 2"):
        rlx.LLM(need(SMOLLM2), device="cpu", tensor_parallel=2)
    with pytest.raises(ValueError, match="GPU index"):
        rlx.LLM(need(SMOLLM2), device="cuda:x")


def test_errors_are_python_exceptions(tmp_path, tiny):
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        rlx.LLM(str(tmp_path / "nope.gguf"))
    with pytest.raises(ValueError, match="dtype must be"):
        rlx.LLM(need(TINY_LLAMA), dtype="int3")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a gguf file at all, just some bytes")
    with pytest.raises(rlx.Error, match="bad.gguf"):
        rlx.LLM(str(bad))
    with pytest.raises(ValueError, match="top_p"):
        tiny.generate("hi", top_p=0.0)
    with pytest.raises(ValueError, match="max_tokens"):
        tiny.generate("hi", max_tokens=0)
    with pytest.raises(TypeError, match="prompt must be a str or a list of token ids"):
        tiny.generate(3.5)
    with pytest.raises(rlx.Error, match="outside the vocabulary"):
        tiny.generate([1, tiny.vocab_size + 3])
    with pytest.raises(TypeError, match="messages"):
        tiny.chat(["not a dict"])
    with pytest.raises(ValueError, match="content"):
        tiny.chat([{"role": "user"}])
    with pytest.raises(rlx.Error, match="chat template"):
        tiny.chat([{"role": "user", "content": "hi"}])  # the tiny model has none
    # The model serves requests after the errors.
    assert tiny.generate([1, 2, 3], max_tokens=3, ignore_eos=True).completion_tokens == 3


def test_keyboard_interrupt_stops_a_long_generation():
    # Ctrl-C as an interactive Python handles it. A shell without job control
    # starts background commands with SIGINT ignored, and then Python neither
    # installs its handler nor honours interrupt_main(): install it here.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_long_generations()
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_long_generations():
    llm = rlx.LLM(need(SMOLLM2), device="cpu", threads=1, ctx_size=4096, max_sequences=1)
    llm.generate(PROMPT, max_tokens=2)  # compiled and warm
    for stream in (False, True):
        timer = threading.Timer(1.0, _thread.interrupt_main)
        t0 = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            if stream:
                for _ in llm.generate(PROMPT, max_tokens=4000, ignore_eos=True, stream=True):
                    pass
            else:
                llm.generate(PROMPT, max_tokens=4000, ignore_eos=True)
        elapsed = time.monotonic() - t0
        timer.join()
        assert elapsed < 10, elapsed  # 4000 tokens take minutes on one thread
        # The one sequence was given back: the model serves the next request.
        assert llm.generate(PROMPT, max_tokens=3).completion_tokens == 3


def test_a_dropped_stream_frees_its_sequence():
    llm = rlx.LLM(need(TINY_LLAMA), device="cpu", threads=1, max_sequences=1)
    with pytest.raises(rlx.Error, match="outside the vocabulary"):
        llm.generate([1, llm.vocab_size], max_tokens=3, stream=True)  # refused: its sequence is given back
    s = llm.generate([1, 45, 96], max_tokens=20, ignore_eos=True, stream=True)
    next(s)
    with pytest.raises(rlx.Error, match="sequence slots are in use"):
        llm.generate([1, 2], max_tokens=2)  # the one sequence is the stream's
    del s
    assert llm.generate([1, 2], max_tokens=2, ignore_eos=True).completion_tokens == 2
    s = llm.generate([1, 45, 96], max_tokens=20, ignore_eos=True, stream=True)
    next(s)
    s.close()
    assert list(s) == []
    assert llm.generate([1, 2], max_tokens=2, ignore_eos=True).completion_tokens == 2


def test_streams_and_threads_share_the_engine(tiny):
    prompts = [[1, 45, 96, 173, 17], [1, 300, 20], [1, 7]]
    want = [tiny.generate(p, max_tokens=15, ignore_eos=True).text for p in prompts]
    # Two streams read in turn, one piece each.
    s = [tiny.generate(p, max_tokens=15, ignore_eos=True, stream=True) for p in prompts[:2]]
    got = ["", ""]
    live = [True, True]
    while any(live):
        for i in range(2):
            if live[i]:
                try:
                    got[i] += next(s[i])
                except StopIteration:
                    live[i] = False
    assert got == want[:2]
    # Three Python threads on one model.
    out = [None] * 3
    errors = []

    def work(i):
        try:
            out[i] = tiny.generate(prompts[i], max_tokens=15, ignore_eos=True).text
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert out == want


def test_the_gil_is_released_while_generating(smollm2):
    during = ticks_while(lambda: smollm2.generate(PROMPT, max_tokens=24, ignore_eos=True))
    assert during > 100000, during
