# A server of one KV slot, a queue of one and a 3 s time limit: what a client
# sees when the server is full, slow or left, and that it recovers.
import json
import socket
import threading
import time

import openai
import pytest

from conftest import DECODER, Server, get, metric, post

MODEL = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="module")
def small():
    s = Server("--model", DECODER, "--parallel", "1", "--max-queue", "1", "--time-limit", "3", "--ctx-size", "2048",
               log_name="small")
    yield s
    s.stop()


def client(s):
    return openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_token_id_prompt_equals_text_prompt(small):
    status, toks = post(small.url + "/tokenize", {"inputs": "Water boils at", "add_special_tokens": True})
    assert status == 200
    ids = [t["id"] for t in toks[0]]
    assert len(ids) >= 3 and "".join(t["text"] for t in toks[0]).endswith("Water boils at")
    c = client(small)
    by_text = c.completions.create(model=MODEL, prompt="Water boils at", max_tokens=8, temperature=0)
    by_ids = c.completions.create(model=MODEL, prompt=ids, max_tokens=8, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == len(ids)


def wait_for(cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_time_limit_answers_504_and_frees_the_slot(small):
    with pytest.raises(openai.APIStatusError) as e:
        client(small).completions.create(model=MODEL, prompt="Tell a long story:", max_tokens=1500, temperature=0,
                                         extra_body={"ignore_eos": True})
    assert e.value.status_code == 504
    assert "time limit" in str(e.value)
    assert wait_for(lambda: metric(small.url, "rlx_running_sequences") == 0)
    r = client(small).completions.create(model=MODEL, prompt="Hi", max_tokens=2, temperature=0)
    assert r.usage.completion_tokens >= 1


def test_time_limit_in_a_stream_is_an_error_event(small):
    with pytest.raises(openai.APIError, match="time limit"):
        for _ in client(small).completions.create(model=MODEL, prompt="Count:", max_tokens=1500, temperature=0,
                                                  stream=True, extra_body={"ignore_eos": True}):
            pass


def raw_stream(url, body):
    """Starts a streamed request on a raw socket and returns the socket once the first event has arrived."""
    host, port = url.replace("http://", "").split(":")
    s = socket.create_connection((host, int(port)))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(data)).encode() + b"\r\n\r\n" + data)
    got = b""
    while b"data: {" not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    return s


def test_client_leaving_mid_stream_frees_its_slot(small):
    before = metric(small.url, "rlx_generated_tokens_total")
    s = raw_stream(small.url, {"prompt": "Once upon a time", "max_tokens": 1000, "temperature": 0, "stream": True,
                               "ignore_eos": True})
    assert metric(small.url, "rlx_running_sequences") == 1
    s.close()
    assert wait_for(lambda: metric(small.url, "rlx_running_sequences") == 0, timeout=10)
    generated = metric(small.url, "rlx_generated_tokens_total") - before
    assert generated < 200  # it stopped long before its 1000 tokens
    r = client(small).completions.create(model=MODEL, prompt="Hi", max_tokens=2, temperature=0)
    assert r.usage.completion_tokens >= 1


def test_queue_full_answers_503_with_retry_after(small):
    s = raw_stream(small.url, {"prompt": "Once upon a time", "max_tokens": 1000, "temperature": 0, "stream": True,
                               "ignore_eos": True})  # holds the one slot
    results = {}

    def waiting():
        results["waiting"] = post(small.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "temperature": 0})

    t = threading.Thread(target=waiting)
    t.start()
    assert wait_for(lambda: metric(small.url, "rlx_generation_queue_depth") == 1)
    from conftest import request
    status, body, headers = request(small.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    assert status == 503
    assert body["error"]["code"] == "queue_full" and body["error"]["type"] == "server_error"
    assert headers.get("Retry-After") == "1"
    s.close()  # the slot frees; the waiting request runs
    t.join(timeout=60)
    assert results["waiting"][0] == 200 and results["waiting"][1]["usage"]["completion_tokens"] >= 1
    status, _ = get(small.url + "/health")
    assert status == 200


def test_api_key_is_required_when_set():
    s = Server("--model", DECODER, "--parallel", "1", "--ctx-size", "256", "--api-key", "sesame", "--no-prepare",
               log_name="key")
    try:
        status, body = post(s.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 1})
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0).models.list()
        ok = openai.OpenAI(base_url=s.url + "/v1", api_key="sesame", max_retries=0)
        assert [m.id for m in ok.models.list().data] == [MODEL]
        assert get(s.url + "/health")[0] == 200  # a load balancer's probe needs no key
    finally:
        s.stop()
