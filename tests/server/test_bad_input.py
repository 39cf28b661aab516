# Hostile and malformed requests: each a clear 4xx in the route's error shape,
# and the server still answers correctly afterwards.
import json
import socket
import threading

import pytest

from conftest import get, post, request

CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "hi"}]

CASES = [
    # (route, raw body or JSON, status, param, message fragment)
    (CHAT, b"{not json", 400, None, "not valid JSON"),
    (CHAT, b"[1, 2]", 400, None, "JSON object"),
    (CHAT, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400, None, "not valid JSON"),
    (CHAT, {"max_tokens": 3}, 400, "messages", "required"),
    (CHAT, {"messages": []}, 400, "messages", "nonempty"),
    (CHAT, {"messages": "hi"}, 400, "messages", "nonempty array"),
    (CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role", "wizard"),
    (CHAT, {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content", "string"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400,
     "messages[0].content[0]", "text part"),
    (CHAT, {"messages": MSG, "max_tokens": "ten"}, 400, "max_tokens", "integer"),
    (CHAT, {"messages": MSG, "max_tokens": 0}, 400, "max_tokens", "integer in"),
    (CHAT, {"messages": MSG, "max_tokens": 2.5}, 400, "max_tokens", "integer"),
    (CHAT, {"messages": MSG, "max_tokens": 18446744073709551615}, 400, "max_tokens", "integer in"),
    (CHAT, {"messages": MSG, "max_tokens": 10**9}, 400, "messages", "context"),
    (CHAT, {"messages": MSG, "temperature": "hot"}, 400, "temperature", "number"),
    (CHAT, {"messages": MSG, "temperature": 5}, 400, "temperature", "number in"),
    (CHAT, {"messages": MSG, "top_p": 0}, 400, "top_p", "(0, 1]"),
    (CHAT, {"messages": MSG, "stop": [1]}, 400, "stop[0]", "string"),
    (CHAT, {"messages": MSG, "stop": [""]}, 400, "stop", "nonempty"),
    (CHAT, {"messages": MSG, "stop": ["a"] * 17}, 400, "stop", "at most"),
    (CHAT, {"messages": MSG, "stream": "yes"}, 400, "stream", "boolean"),
    (CHAT, {"messages": MSG, "n": 3}, 400, "n", "must be 1"),
    (CHAT, {"messages": MSG, "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tools", "tools"),
    (CHAT, {"messages": MSG, "response_format": {"type": "json_schema"}}, 400, "response_format", "structured"),
    (CHAT, {"messages": MSG, "logit_bias": {"1": 5}}, 400, "logit_bias", "not supported"),
    (CHAT, {"messages": MSG, "max_token": 3}, 400, "max_token", "Unrecognized"),
    (CHAT, {"messages": MSG, "model": "other"}, 404, "model", "does not exist"),
    ("/v1/completions", {"prompt": ""}, 400, "prompt", "empty"),
    ("/v1/completions", {"prompt": [1, -2]}, 400, "prompt[1]", "token id"),
    ("/v1/completions", {"prompt": [1, 99999999]}, 400, "prompt[1]", "vocabulary"),
    ("/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt", "one prompt per request"),
    ("/v1/completions", {"prompt": "x " * 600}, 400, "prompt", "context"),
    ("/v1/completions", {"prompt": "x", "echo": True}, 400, "echo", "not supported"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2"}, 400, "input", "required"),
    ("/v1/embeddings", {"input": [[1, 2]]}, 400, "input", "token-id"),
    ("/v1/embeddings", {"input": []}, 400, "input", "nonempty"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, 400, "encoding_format", "base64"),
    ("/v1/embeddings", {"input": "x", "dimensions": 4096}, 400, "dimensions", "at most"),
    ("/v1/embeddings", {"input": "x", "model": "SmolLM2-135M-Instruct.Q4_1"}, 404, "model", "does not exist"),
]


@pytest.mark.parametrize("route,body,status,param,fragment", CASES)
def test_bad_request(server, route, body, status, param, fragment):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    got, reply, _ = request(server.url + route, raw=raw)
    assert got == status, reply
    err = reply["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    assert fragment in err["message"], err["message"]


TEI_CASES = [
    ("/embed", {}, 400, "required"),
    ("/embed", {"inputs": 5}, 400, "string"),
    ("/embed", {"inputs": "x", "normalize": "no"}, 400, "boolean"),
    ("/embed", {"inputs": "word " * 600, "truncate": False}, 413, "inputs[0]"),
    ("/tokenize", {"inputs": None}, 400, "inputs"),
]


@pytest.mark.parametrize("route,body,status,fragment", TEI_CASES)
def test_bad_tei_request(server, route, body, status, fragment):
    got, reply, _ = request(server.url + route, body)
    assert got == status, reply
    assert set(reply) == {"error", "error_type"}
    assert fragment in reply["error"], reply


def test_oversized_body_is_413(server):
    got, reply, _ = request(server.url + "/v1/embeddings", raw=b'{"input": "' + b"a" * (9 << 20) + b'"}')
    assert got == 413
    assert reply["error"]["code"] == "body_too_large"


def test_unknown_route_is_404(server):
    got, reply, _ = request(server.url + "/v1/nothing")
    assert got == 404 and "no route" in reply["error"]["message"]


def test_garbage_bytes_do_not_hurt(server):
    for junk in (b"\x00\x01\x02 garbage\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(junk)
        s.close()
    status, body = post(server.url + "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 3,
                                                         "temperature": 0})
    assert status == 200 and body["choices"][0]["text"].startswith(" Paris")


def test_ten_thousand_tiny_bad_requests_at_once(server):
    errors = []

    def hammer(k):
        for _ in range(k):
            try:
                got, reply, _ = request(server.url + "/v1/completions", raw=b"{", timeout=60)
                if got != 400 or "not valid JSON" not in reply["error"]["message"]:
                    errors.append((got, reply))
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

    threads = [threading.Thread(target=hammer, args=(250,)) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    status, body = post(server.url + "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 3,
                                                         "temperature": 0})
    assert status == 200 and body["choices"][0]["text"].startswith(" Paris")
