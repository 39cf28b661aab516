# TEI's /rerank on a cross-encoder (a tiny random BertForSequenceClassification
# in a real directory layout), checked against `rlx rerank` on the same model.
import json
import math
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import EMBEDDER, RLX, Server, get, post
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


def cli_scores(model_dir, raw, extra=()):
    args = [RLX, "rerank", "--model", model_dir, "--query", QUERY, "--format", "json", *extra, *TEXTS]
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


def test_int8_products_score_as_rlx_rerank_quantize_int8(reranker):
    """--embedding-quantize int8: the served scores are `rlx rerank --quantize
    int8`'s, near the f32 ones and not equal to them (the int8 path ran)."""
    _, d = reranker
    try:
        s = Server("--embedding-model", d, "--embedding-quantize", "int8", "--dtype", "bf16", log_name="rerank-int8")
    except RuntimeError as e:
        if "AVX512-VNNI" in str(e):
            pytest.skip("this processor has no AVX512-VNNI")
        raise
    try:
        status, body = post(s.url + "/rerank", {"query": QUERY, "texts": TEXTS})
        assert status == 200, body
        got = {r["index"]: r["score"] for r in body}
        want = cli_scores(d, raw=False, extra=("--quantize", "int8", "--dtype", "bf16"))
        f32 = cli_scores(d, raw=False)
        assert sorted(got) == list(range(len(TEXTS)))
        for i, x in got.items():
            assert x == pytest.approx(want[i], abs=1e-6)
            assert x == pytest.approx(f32[i], abs=2e-2)
        assert max(abs(got[i] - f32[i]) for i in got) > 0
    finally:
        s.stop()


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


# The instruction of a causal-LM cross-encoder, per request: "prompt" (the
# text) or "prompt_name" (one of config_sentence_transformers.json's
# prompts), as `rlx rerank --prompt/--prompt-name` takes them.
def reference():
    with open(os.path.join(CAUSAL, "reference.json")) as f:
        return json.load(f)


def cli_rerank(model_dir, query, texts, *flags):
    out = subprocess.run([RLX, "rerank", "--device", "cpu", "--model", model_dir, "--query", query, "--format", "json",
                          *flags, *texts], capture_output=True, text=True, check=True).stdout
    return {r["index"]: r["score"] for r in json.loads(out)["results"]}


def scores_of(body):
    return {r["index"]: r["score"] for r in body}


def test_causal_rerank_prompt_is_the_instruction(causal_reranker):
    ref = reference()
    docs = [p["document"] for p in ref["pairs"]]
    status, plain = post(causal_reranker.url + "/rerank", {"query": ref["query"], "texts": docs})
    assert status == 200, plain
    status, body = post(causal_reranker.url + "/rerank", {"query": ref["query"], "texts": docs, "prompt": ref["prompt"]})
    assert status == 200, body
    got, before = scores_of(body), scores_of(plain)
    for i, p in enumerate(ref["pairs"]):
        assert got[i] == pytest.approx(p["prompt_score"], abs=1e-4)
    assert max(abs(got[i] - before[i]) for i in got) > 1e-3  # the prompt reached the model
    want = cli_rerank(CAUSAL, ref["query"], docs, "--prompt", ref["prompt"])
    for i, x in got.items():
        assert x == pytest.approx(want[i], abs=1e-6)
    # "" is no prompt: the template's default instruction.
    status, empty = post(causal_reranker.url + "/rerank", {"query": ref["query"], "texts": docs, "prompt": ""})
    assert status == 200, empty
    for i, x in scores_of(empty).items():
        assert x == pytest.approx(before[i], abs=1e-6)


def test_causal_rerank_prompt_requests_that_are_refused(causal_reranker):
    ref = reference()
    body = {"query": ref["query"], "texts": ["a"]}
    status, err = post(causal_reranker.url + "/rerank", {**body, "prompt_name": "query"})
    assert status == 400, err
    assert "'prompt_name'" in err["error"] and "no prompt named 'query'" in err["error"], err
    status, err = post(causal_reranker.url + "/rerank", {**body, "prompt": "x", "prompt_name": "query"})
    assert status == 400 and "'prompt'" in err["error"] and "'prompt_name'" in err["error"], err
    status, err = post(causal_reranker.url + "/rerank", {**body, "prompt": 3})
    assert status == 400 and "prompt" in err["error"], err


@pytest.fixture(scope="module")
def named_prompts():
    """The fixture with two named prompts in config_sentence_transformers.json."""
    d = os.path.join(tempfile.mkdtemp(), "qwen3-reranker-prompts")
    shutil.copytree(CAUSAL, d)
    path = os.path.join(d, "config_sentence_transformers.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["prompts"] = {"qa": reference()["prompt"], "web": "Given a web search query, retrieve relevant passages"}
    with open(path, "w") as f:
        json.dump(cfg, f)
    s = Server("--embedding-model", d, log_name="rerank-prompts")
    yield s, d
    s.stop()


def test_causal_rerank_prompt_name(named_prompts):
    s, d = named_prompts
    ref = reference()
    docs = [p["document"] for p in ref["pairs"]]
    status, body = post(s.url + "/rerank", {"query": ref["query"], "texts": docs, "prompt_name": "qa"})
    assert status == 200, body
    got = scores_of(body)
    for i, p in enumerate(ref["pairs"]):
        assert got[i] == pytest.approx(p["prompt_score"], abs=1e-4)
    want = cli_rerank(d, ref["query"], docs, "--prompt-name", "qa")
    for i, x in got.items():
        assert x == pytest.approx(want[i], abs=1e-6)
    status, web = post(s.url + "/rerank", {"query": ref["query"], "texts": docs, "prompt_name": "web"})
    assert status == 200, web
    assert max(abs(x - got[i]) for i, x in scores_of(web).items()) > 1e-3
    status, err = post(s.url + "/rerank", {"query": ref["query"], "texts": docs, "prompt_name": "nope"})
    assert status == 400, err
    for part in ("'prompt_name'", "'nope'", "qa", "web"):
        assert part in err["error"], err


def test_a_sequence_classification_cross_encoder_takes_no_prompt(reranker):
    s, _ = reranker
    for field, value in (("prompt", "Judge: "), ("prompt_name", "query")):
        status, err = post(s.url + "/rerank", {"query": QUERY, "texts": TEXTS, field: value})
        assert status == 400, err
        assert err["error"].startswith(f"'{field}'") and "takes no prompt" in err["error"], err
    status, body = post(s.url + "/rerank", {"query": QUERY, "texts": TEXTS, "prompt": None})
    assert status == 200, body  # null is no prompt


# Qwen3-Reranker as Qwen publishes it: a plain causal LM directory (the
# fixture without its sentence-transformers files), served with
# --rerank-recipe qwen3-reranker, gives the saved CrossEncoder's scores.
@pytest.fixture(scope="module")
def plain_reranker():
    d = os.path.join(tempfile.mkdtemp(), "Qwen3-Reranker")
    os.makedirs(d)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(CAUSAL, f), d)
    s = Server("--embedding-model", d, "--rerank-recipe", "qwen3-reranker", log_name="rerank-plain")
    yield s, d
    s.stop()


def test_plain_qwen3_reranker_with_the_recipe(plain_reranker):
    s, d = plain_reranker
    ref = reference()
    docs = [p["document"] for p in ref["pairs"]]
    for prompt in (None, ref["prompt"]):
        body = {"query": ref["query"], "texts": docs, **({"prompt": prompt} if prompt else {})}
        status, out = post(s.url + "/rerank", body)
        assert status == 200, out
        got = scores_of(out)
        for i, p in enumerate(ref["pairs"]):
            assert got[i] == pytest.approx(p["prompt_score" if prompt else "score"], abs=1e-4)
        want = cli_rerank(d, ref["query"], docs, "--recipe", "qwen3-reranker", *(["--prompt", prompt] if prompt else []))
        for i, x in got.items():
            assert x == pytest.approx(want[i], abs=1e-6)
    status, info = get(s.url + "/info")
    assert status == 200 and info["model_type"] == {"reranker": {"activation": "sigmoid"}}, info
