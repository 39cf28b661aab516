# TEI's /rerank on a cross-encoder (a tiny random BertForSequenceClassification
# in a real directory layout), checked against `rlx rerank` on the same model.
import json
import math
import os
import subprocess
import tempfile

import pytest

from conftest import EMBEDDER, RLX, Server, post
from tiny_cross_encoder import write

QUERY = "how do plants make food"
TEXTS = ["Plants use sunlight to make sugar.", "The stock market fell today.", "",
         "Photosynthesis turns light, water and carbon dioxide into glucose.", "Plants use sunlight to make sugar."]


@pytest.fixture(scope="module")
def reranker():
    d = write(os.path.join(tempfile.mkdtemp(), "tiny-cross-encoder"), EMBEDDER)
    s = Server("--embedding-model", d, log_name="rerank")
    yield s, d
    s.stop()


def cli_scores(model_dir, raw):
    args = [RLX, "rerank", "--model", model_dir, "--query", QUERY, "--format", "json", *TEXTS]
    out = subprocess.run(args + (["--raw"] if raw else []), capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)["results"]
    return {r["index"]: r["score"] for r in rows}


def test_rerank_equals_rlx_rerank_and_sorts(reranker):
    s, d = reranker
    status, body = post(s.url + "/rerank", {"query": QUERY, "texts": TEXTS, "return_text": True})
    assert status == 200, body
    assert sorted(r["index"] for r in body) == list(range(len(TEXTS)))
    scores = [r["score"] for r in body]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < x < 1 for x in scores)  # sigmoid for one label
    assert all(r["text"] == TEXTS[r["index"]] for r in body)
    by_index = {r["index"]: r["score"] for r in body}
    assert by_index[0] == by_index[4]  # the same text, the same score
    assert len(set(round(x, 6) for x in scores)) >= 3  # random weights still tell texts apart
    want = cli_scores(d, raw=False)
    for i, x in by_index.items():
        assert x == pytest.approx(want[i], abs=1e-6)


def test_raw_scores_are_the_logits(reranker):
    s, d = reranker
    status, scored = post(s.url + "/rerank", {"query": QUERY, "texts": TEXTS})
    status_raw, raw = post(s.url + "/rerank", {"query": QUERY, "texts": TEXTS, "raw_scores": True})
    assert status == 200 and status_raw == 200
    sig = {r["index"]: r["score"] for r in scored}
    for r in raw:
        assert 1 / (1 + math.exp(-r["score"])) == pytest.approx(sig[r["index"]], abs=1e-6)
    assert "text" not in raw[0]


def test_a_cross_encoder_does_not_embed(reranker):
    s, _ = reranker
    status, body = post(s.url + "/embed", {"inputs": "x"})
    assert status == 400 and "cross-encoder" in body["error"]
    status, body = post(s.url + "/v1/embeddings", {"input": "x"})
    assert status == 400 and body["error"]["code"] == "model_not_embedding"
    status, body = post(s.url + "/rerank", {"query": 5, "texts": ["a"]})
    assert status == 400 and "query" in body["error"]
    status, body = post(s.url + "/rerank", {"query": "q"})
    assert status == 400 and "texts" in body["error"]


def test_rerank_on_an_embedding_model_is_refused(server):
    status, body = post(server.url + "/rerank", {"query": "q", "texts": ["a"]})
    assert status == 400 and "cross-encoder" in body["error"]


# A causal LM as a cross-encoder (tests/data/qwen3_reranker: a tiny random
# Qwen3ForCausalLM saved as sentence-transformers saves Qwen3-Reranker): the
# same route gives CrossEncoder.predict's scores (reference.json).
CAUSAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "qwen3_reranker")


@pytest.fixture(scope="module")
def causal_reranker():
    s = Server("--embedding-model", CAUSAL, log_name="rerank-causal")
    yield s
    s.stop()


def test_causal_lm_rerank_gives_cross_encoder_predict(causal_reranker):
    with open(os.path.join(CAUSAL, "reference.json")) as f:
        ref = json.load(f)
    docs = [p["document"] for p in ref["pairs"]]
    status, body = post(causal_reranker.url + "/rerank", {"query": ref["query"], "texts": docs})
    assert status == 200, body
    assert sorted(r["index"] for r in body) == list(range(len(docs)))
    assert [r["score"] for r in body] == sorted((r["score"] for r in body), reverse=True)
    for r in body:
        assert r["score"] == pytest.approx(ref["pairs"][r["index"]]["score"], abs=1e-4)
    status, raw = post(causal_reranker.url + "/rerank", {"query": ref["query"], "texts": docs, "raw_scores": True})
    assert status == 200, raw
    for r in raw:
        assert r["score"] == pytest.approx(ref["pairs"][r["index"]]["logit"], abs=1e-4)
