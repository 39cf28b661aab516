# TEI's routes with curl, as its users call them.
import json
import subprocess

import numpy as np

from test_openai import cli_embed


def curl(url, body=None):
    cmd = ["curl", "-s", "-w", "\n%{http_code}", url]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    text, code = out.rsplit("\n", 1)
    return int(code), text


def test_embed_equals_rlx_embed(server):
    texts = ["What is deep learning?", "", "Deep learning is a kind of machine learning."]
    code, text = curl(server.url + "/embed", {"inputs": texts})
    assert code == 200
    got = np.array(json.loads(text), dtype=np.float32)
    np.testing.assert_allclose(got, cli_embed(texts), atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    code, text = curl(server.url + "/embed", {"inputs": "What is deep learning?"})
    assert code == 200
    np.testing.assert_array_equal(np.array(json.loads(text), dtype=np.float32)[0], got[0])


def test_embed_truncates_long_input_when_asked(server):
    code, text = curl(server.url + "/embed", {"inputs": "word " * 600, "truncate": True})
    assert code == 200 and len(json.loads(text)[0]) == 384


def test_tokenize_uses_the_embedding_models_wordpiece(server):
    code, text = curl(server.url + "/tokenize", {"inputs": ["hello world"]})
    assert code == 200
    ids = [t["id"] for t in json.loads(text)[0]]
    assert ids == [101, 7592, 2088, 102]  # [CLS] hello world [SEP] in MiniLM's vocabulary


def test_health_info_metrics(server):
    code, text = curl(server.url + "/health")
    assert code == 200 and json.loads(text) == {"status": "ok"}
    code, text = curl(server.url + "/info")
    info = json.loads(text)
    assert code == 200
    assert info["model_id"] == "all-MiniLM-L6-v2" and info["max_input_length"] == 256
    assert info["model_type"]["embedding"]["dim"] == 384
    assert info["generation"]["model_id"] == "SmolLM2-135M-Instruct.Q4_1" and info["generation"]["parallel"] == 16
    curl(server.url + "/embed", {"inputs": "count me"})
    code, text = curl(server.url + "/metrics")
    assert code == 200
    lines = text.splitlines()
    assert any(l.startswith('rlx_requests_total{route="/embed",status="200"} ') for l in lines)
    assert any(l.startswith("rlx_time_to_first_token_seconds_bucket") for l in lines)
    assert any(l.startswith("rlx_kv_slots 16") for l in lines)
    for name in ("rlx_running_sequences", "rlx_generation_queue_depth", "rlx_kv_pool_usage_ratio",
                 "rlx_generated_tokens_total", "rlx_inter_token_latency_seconds_count"):
        assert any(l.startswith(name + " ") for l in lines), name
