# The OpenAI routes through the official `openai` client, checked against
# the rlx command line on the same models.
import base64
import json
import subprocess

import numpy as np
import openai
import pytest

from conftest import DECODER, EMBEDDER, RLX, get


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def cli_generate(prompt, n):
    out = subprocess.run([RLX, "generate", "--model", DECODER, "--prompt", prompt, "-n", str(n)],
                         capture_output=True, text=True, check=True)
    return out.stdout.rstrip("\n")


def cli_embed(texts):
    out = subprocess.run([RLX, "embed", "--model", EMBEDDER, "--format", "compact", *texts],
                         capture_output=True, text=True, check=True)
    return np.array([json.loads(line) for line in out.stdout.splitlines()], dtype=np.float32)


def test_models_lists_both(server):
    ids = sorted(m.id for m in client(server).models.list().data)
    assert ids == ["SmolLM2-135M-Instruct.Q4_1", "all-MiniLM-L6-v2"]


def test_completion_equals_rlx_generate(server):
    prompt = "The capital of France is"
    r = client(server).completions.create(model="SmolLM2-135M-Instruct.Q4_1", prompt=prompt, max_tokens=12,
                                          temperature=0)
    assert r.choices[0].text == cli_generate(prompt, 12)
    assert r.choices[0].finish_reason in ("length", "stop")
    assert r.usage.completion_tokens <= 12 and r.usage.completion_tokens >= 1
    assert r.usage.prompt_tokens == 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streamed_equals_not_streamed(server):
    c = client(server)
    messages = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a color."}]
    whole = c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=messages, max_tokens=24,
                                      temperature=0)
    text = whole.choices[0].message.content
    assert whole.choices[0].message.role == "assistant"
    assert len(text) > 0
    pieces, finish, usage = [], None, None
    for chunk in c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=messages, max_tokens=24,
                                           temperature=0, stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            if ch.delta.content:
                pieces.append(ch.delta.content)
            if ch.finish_reason:
                finish = ch.finish_reason
    assert "".join(pieces) == text
    assert len(pieces) >= 2
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_chat_turn_end_stops_the_reply(server):
    r = client(server).chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                               messages=[{"role": "user", "content": "Say yes."}], max_tokens=200,
                                               temperature=0)
    assert r.choices[0].finish_reason == "stop"
    assert "<|im_end|>" not in r.choices[0].message.content
    assert r.usage.completion_tokens < 200


def test_second_turn_reuses_the_cached_prefix(server):
    c = client(server)
    first = [{"role": "user", "content": "Tell me about the moon in one sentence."}]
    a = c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=first, max_tokens=30, temperature=0)
    second = first + [{"role": "assistant", "content": a.choices[0].message.content},
                      {"role": "user", "content": "And the sun?"}]
    b = c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=second, max_tokens=10, temperature=0)
    assert b.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens
    # The cache changes no answer: a server with nothing cached says the same.
    again = c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=second, max_tokens=10, temperature=0)
    assert again.choices[0].message.content == b.choices[0].message.content


def test_stop_string_ends_before_it(server):
    c = client(server)
    full = c.completions.create(model="SmolLM2-135M-Instruct.Q4_1", prompt="1, 2, 3, 4,", max_tokens=16,
                                temperature=0).choices[0].text
    assert " 7" in full
    cut = c.completions.create(model="SmolLM2-135M-Instruct.Q4_1", prompt="1, 2, 3, 4,", max_tokens=16,
                               temperature=0, stop=[" 7"])
    assert cut.choices[0].text == full[:full.index(" 7")]
    assert cut.choices[0].finish_reason == "stop"


def test_seeded_sampling_repeats(server):
    c = client(server)
    kw = dict(model="SmolLM2-135M-Instruct.Q4_1", prompt="Once upon a time", max_tokens=16, temperature=0.9,
              top_p=0.95, seed=1234)
    a = c.completions.create(**kw).choices[0].text
    b = c.completions.create(**kw).choices[0].text
    assert a == b
    others = {c.completions.create(**{**kw, "seed": s}).choices[0].text for s in (1, 2, 3)}
    assert len(others | {a}) >= 2  # other seeds sample other text


def test_embeddings_equal_rlx_embed(server):
    texts = ["A man is eating food.", "", "A man is eating food.", "The sky is blue today, isn't it?"]
    r = client(server).embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    assert [d.index for d in r.data] == [0, 1, 2, 3]
    want = cli_embed(texts)
    assert got.shape == (4, 384)
    np.testing.assert_allclose(got, want, atol=2e-6)
    np.testing.assert_array_equal(got[0], got[2])
    assert r.usage.prompt_tokens > 10


def test_embeddings_base64_and_dimensions(server):
    c = client(server)
    plain = np.array(c.embeddings.create(model="all-MiniLM-L6-v2", input="hello there").data[0].embedding)
    raw = c.embeddings.with_raw_response.create(model="all-MiniLM-L6-v2", input="hello there",
                                                encoding_format="base64")
    b64 = json.loads(raw.text)["data"][0]["embedding"]
    decoded = np.frombuffer(base64.b64decode(b64), dtype="<f4")
    np.testing.assert_array_equal(decoded, plain.astype(np.float32))
    short = np.array(c.embeddings.create(model="all-MiniLM-L6-v2", input="hello there", dimensions=64).data[0].embedding)
    assert short.shape == (64,)
    np.testing.assert_allclose(short, plain[:64] / np.linalg.norm(plain[:64]), atol=1e-6)


def test_openai_errors_raise_with_rlx_messages(server):
    c = client(server)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.completions.create(model="gpt-4", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError, match="context"):
        c.completions.create(model="SmolLM2-135M-Instruct.Q4_1", prompt="hello", max_tokens=100000)
    with pytest.raises(openai.BadRequestError, match="'n' must be 1"):
        c.completions.create(model="SmolLM2-135M-Instruct.Q4_1", prompt="hello", max_tokens=1, n=2)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=[{"role": "user", "content": "x"}],
                                  temperature=-1)
    status, _ = get(server.url + "/health")
    assert status == 200
