"""rlx.CrossEncoder against sentence-transformers' CrossEncoder.predict and
.rank (reference.json beside each fixture, written by its make_*_case.py) and
`rlx rerank`'s output: a BERT sequence-classification cross-encoder and a
Qwen3-Reranker-style causal LM, both tiny and random, on the CPU."""

import json
import os

import numpy as np
import pytest

import rlx
from conftest import DATA, MINILM, need, run_cli, ticks_while

BERT = DATA / "bert_cross_encoder"
QWEN3 = DATA / "qwen3_reranker"
# The C++ tests' tolerances against the same references.
BERT_SCORE_TOL, BERT_LOGIT_TOL = 1e-5, 2e-5
QWEN3_TOL = 1e-4


def bert_reference():
    return json.loads((BERT / "reference.json").read_text())


def qwen3_reference():
    return json.loads((QWEN3 / "reference.json").read_text())


@pytest.fixture(scope="module")
def bert():
    return rlx.CrossEncoder(need(BERT), device="cpu", threads=1)


@pytest.fixture(scope="module")
def qwen3():
    return rlx.CrossEncoder(need(QWEN3), device="cpu", threads=1)


def test_bert_scores_equal_sentence_transformers_predict(bert):
    ref = bert_reference()
    pairs = [(p["query"], p["document"]) for p in ref["pairs"]]
    assert any(p["cut"] for p in ref["pairs"]) and len({q for q, _ in pairs}) >= 3
    scores = bert.predict(pairs)
    assert isinstance(scores, np.ndarray) and scores.dtype == np.float32 and scores.shape == (len(pairs),)
    np.testing.assert_allclose(scores, [p["score"] for p in ref["pairs"]], atol=BERT_SCORE_TOL, rtol=0)
    logits = bert.predict(pairs, activation=False)
    np.testing.assert_allclose(logits, [p["logit"] for p in ref["pairs"]], atol=BERT_LOGIT_TOL, rtol=0)
    np.testing.assert_allclose(scores, 1 / (1 + np.exp(-logits.astype(np.float64))), atol=1e-6)
    assert np.ptp(logits) > 0.5  # the pairs score apart: the documents were read
    assert bert.max_length == ref["max_length"] and bert.num_labels == 1 and bert.activation == "sigmoid"
    assert not bert.takes_prompt


def test_int8_products_score_close_to_f32(bert):
    """quantize='int8' (rlx rerank --quantize int8): scores within 2e-2 of
    CrossEncoder.predict's, not identical to rlx's f32 ones (the int8 path
    ran), the CLI's to print precision; CUDA and other names refused."""
    ref = bert_reference()
    pairs = [(p["query"], p["document"]) for p in ref["pairs"]]
    q = rlx.CrossEncoder(need(BERT), device="auto", dtype="bf16", threads=1, quantize="int8")
    assert q.quantize == "int8" and q.device == "cpu" and bert.quantize is None
    assert "quantize='int8'" in repr(q)
    scores = q.predict(pairs)
    np.testing.assert_allclose(scores, [p["score"] for p in ref["pairs"]], atol=2e-2, rtol=0)
    assert np.abs(scores - bert.predict(pairs)).max() > 0
    query = ref["pairs"][0]["query"]
    docs = [p["document"] for p in ref["pairs"] if p["query"] == query]
    out = json.loads(run_cli("rerank", "--model", str(BERT), "--dtype", "bf16", "--quantize", "int8", "--threads",
                             "1", "--query", query, *docs))
    cli = {r["index"]: r["score"] for r in out["results"]}
    np.testing.assert_allclose([cli[i] for i in range(len(docs))], q.predict([(query, d) for d in docs]), atol=1e-6)
    with pytest.raises(ValueError, match="int8"):
        rlx.CrossEncoder(need(BERT), device="cpu", quantize="int4")
    with pytest.raises(ValueError, match="CPU only"):
        rlx.CrossEncoder(need(BERT), device="cuda", quantize="int8")


def test_scores_keep_input_order_across_queries_and_batch_sizes(bert):
    ref = bert_reference()
    pairs = [(p["query"], p["document"]) for p in ref["pairs"]]
    want = np.array([p["score"] for p in ref["pairs"]])
    order = np.random.default_rng(3).permutation(len(pairs))
    for b in (1, 3, 4, 100):
        got = bert.predict([pairs[i] for i in order], batch_size=b)
        np.testing.assert_allclose(got, want[order], atol=BERT_SCORE_TOL, rtol=0, err_msg=f"batch_size {b}")
    # Any iterable of pairs, lists or tuples, and a 2-D numpy array of str.
    np.testing.assert_allclose(bert.predict(iter([list(p) for p in pairs])), want, atol=BERT_SCORE_TOL, rtol=0)
    np.testing.assert_allclose(bert.predict(np.array(pairs)), want, atol=BERT_SCORE_TOL, rtol=0)


def test_one_pair_and_no_pairs_as_sentence_transformers(bert):
    ref = bert_reference()["pairs"][0]
    one = bert.predict([ref["query"], ref["document"]])  # a bare pair: a scalar
    assert isinstance(one, np.float32)
    assert abs(float(one) - ref["score"]) < BERT_SCORE_TOL
    assert float(bert.predict((ref["query"], ref["document"]))) == float(one)
    empty = bert.predict([])
    assert isinstance(empty, np.ndarray) and empty.shape == (0,) and empty.dtype == np.float32
    assert bert.rank("q", []) == []


def test_rank_equals_sentence_transformers_rank(bert):
    r = bert_reference()["rank"]
    got = bert.rank(r["query"], r["documents"])
    assert [x["corpus_id"] for x in got] == [x["corpus_id"] for x in r["all"]]
    for g, w in zip(got, r["all"]):
        assert set(g) == {"corpus_id", "score"} and isinstance(g["score"], float)
        assert abs(g["score"] - w["score"]) < BERT_SCORE_TOL
    # A duplicate document ties; the first stays first, as sorted() keeps it.
    dup = [x["corpus_id"] for x in got if r["documents"][x["corpus_id"]] == r["documents"][0]]
    assert dup == [0, len(r["documents"]) - 1]
    top = bert.rank(r["query"], r["documents"], top_k=3, return_documents=True)
    assert [(x["corpus_id"], x["text"]) for x in top] == [(x["corpus_id"], x["text"]) for x in r["top_3_with_documents"]]
    for g, w in zip(top, r["top_3_with_documents"]):
        assert abs(g["score"] - w["score"]) < BERT_SCORE_TOL
    logits = bert.rank(r["query"], r["documents"], activation=False)
    assert [x["corpus_id"] for x in logits] == [x["corpus_id"] for x in r["logits"]]
    for g, w in zip(logits, r["logits"]):
        assert abs(g["score"] - w["score"]) < BERT_LOGIT_TOL
    assert bert.rank(r["query"], r["documents"], top_k=0) == []
    assert len(bert.rank(r["query"], r["documents"], top_k=100)) == len(r["documents"])
    # The scores are predict's.
    scores = bert.predict([(r["query"], d) for d in r["documents"]])
    assert [x["score"] for x in got] == [float(scores[x["corpus_id"]]) for x in got]


def test_qwen3_reranker_equals_sentence_transformers_with_and_without_a_prompt(qwen3):
    ref = qwen3_reference()
    q, docs = ref["query"], [p["document"] for p in ref["pairs"]]
    assert qwen3.takes_prompt and qwen3.max_length == ref["max_length"]
    pairs = [(q, d) for d in docs]
    np.testing.assert_allclose(qwen3.predict(pairs), [p["score"] for p in ref["pairs"]], atol=QWEN3_TOL, rtol=0)
    np.testing.assert_allclose(qwen3.predict(pairs, activation=False), [p["logit"] for p in ref["pairs"]],
                               atol=QWEN3_TOL, rtol=0)
    # Pairs of two queries, batched together: the reference query's as alone.
    mixed = [pair for p in pairs for pair in (p, ("Where do cats sleep?", p[1]))]
    got = qwen3.predict(mixed, batch_size=4)
    np.testing.assert_allclose(got[0::2], [p["score"] for p in ref["pairs"]], atol=QWEN3_TOL, rtol=0)
    np.testing.assert_allclose(got[1::2], qwen3.predict([m for m in mixed if m[0] != q]), atol=1e-5, rtol=0)
    assert not np.allclose(got[0::2], got[1::2], atol=1e-3)
    # A prompt per call, and one given at load: the instruction as the system message.
    want = [p["prompt_score"] for p in ref["pairs"]]
    np.testing.assert_allclose(qwen3.predict(pairs, prompt=ref["prompt"]), want, atol=QWEN3_TOL, rtol=0)
    prompted = rlx.CrossEncoder(need(QWEN3), device="cpu", threads=1, prompt=ref["prompt"])
    np.testing.assert_allclose(prompted.predict(pairs), want, atol=QWEN3_TOL, rtol=0)
    # "" is no prompt: the template's default instruction, as without one.
    np.testing.assert_allclose(prompted.predict(pairs, prompt=""), qwen3.predict(pairs), atol=1e-6, rtol=0)
    ranked = qwen3.rank(q, docs, prompt=ref["prompt"], top_k=3)
    assert [x["corpus_id"] for x in ranked] == list(np.argsort(-np.array(want), kind="stable")[:3])
    # Cut to fewer tokens, the template's tail is kept.
    short = rlx.CrossEncoder(need(QWEN3), device="cpu", threads=1, max_length=ref["short_max_length"])
    np.testing.assert_allclose(short.predict(pairs, activation=False), [p["short_logit"] for p in ref["pairs"]],
                               atol=QWEN3_TOL, rtol=0)


def test_prompts_change_scores_as_the_command_line(qwen3):
    ref = qwen3_reference()
    q, docs = ref["query"], [p["document"] for p in ref["pairs"]][:4]
    for prompt in (None, ref["prompt"], "Judge whether the passage is about cats"):
        args = ["rerank", "--format", "compact", "--threads", "1", "--device", "cpu", "--model", str(QWEN3), "-q", q]
        if prompt is not None:
            args += ["--prompt", prompt]
        cli = {}
        for line in run_cli(*args, *docs).splitlines():
            score, index, _ = line.split("\t", 2)
            cli[int(index)] = float(score)
        got = qwen3.predict([(q, d) for d in docs], prompt=prompt)
        # The command line prints 7 significant digits.
        np.testing.assert_allclose(got, [cli[i] for i in range(len(docs))], rtol=1e-6, atol=1e-7, err_msg=prompt)
    assert not np.allclose(qwen3.predict([(q, d) for d in docs], prompt="Judge whether the passage is about cats"),
                           qwen3.predict([(q, d) for d in docs]), atol=1e-3)


def test_a_hub_id_in_the_cache_is_found_as_the_encoder_finds_it(tmp_path, monkeypatch, bert):
    repo = tmp_path / "hub" / "models--test-org--tiny-cross-encoder"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd\n")
    (repo / "snapshots").mkdir()
    os.symlink(BERT, repo / "snapshots" / "0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    pairs = [("what is the capital of france", "paris"), ("a", "b")]
    cached = rlx.CrossEncoder("test-org/tiny-cross-encoder", device="cpu", threads=1)
    np.testing.assert_array_equal(cached.predict(pairs), bert.predict(pairs))
    assert "0123abcd" in repr(cached)
    with pytest.raises(FileNotFoundError, match="test-org/not-cached.*is not in the Hugging Face cache"):
        rlx.CrossEncoder("test-org/not-cached")


def test_an_embedding_model_is_refused_by_name(tmp_path):
    with pytest.raises(rlx.Error, match="is an embedding model .*not a cross-encoder") as e:
        rlx.CrossEncoder(need(MINILM), device="cpu")
    assert str(MINILM) in str(e.value)
    # A causal LM without sentence-transformers' files: rlx's reason names the recipe that would score it.
    plain = tmp_path / "plain-qwen3"
    plain.mkdir()
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        os.symlink(QWEN3 / f, plain / f)
    with pytest.raises(rlx.Error, match="qwen3-reranker") as e:
        rlx.CrossEncoder(str(plain), device="cpu")
    assert str(plain) in str(e.value)
    with pytest.raises(rlx.Error) as e:
        rlx.CrossEncoder(str(plain), device="cpu", recipe="no-such-recipe")
    assert "no-such-recipe" in str(e.value)
    # With its recipe it scores: the instruction, "yes"/"no" and sigmoid are the model card's.
    scored = rlx.CrossEncoder(str(plain), device="cpu", threads=1, recipe="qwen3-reranker")
    assert scored.activation == "sigmoid" and np.isfinite(scored.predict([("a query", "a document")])).all()


def test_errors_are_python_exceptions(tmp_path, bert, qwen3):
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        rlx.CrossEncoder(str(tmp_path / "no-such-model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(rlx.Error, match="config.json"):
        rlx.CrossEncoder(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="dtype must be"):
        rlx.CrossEncoder(need(BERT), dtype="f8")
    with pytest.raises(ValueError, match="max_length must be"):
        rlx.CrossEncoder(need(BERT), max_length=-1)
    # A sequence-classification cross-encoder takes no prompt: refused, naming the model, not dropped.
    with pytest.raises(rlx.Error, match="prompt") as e:
        rlx.CrossEncoder(need(BERT), device="cpu", prompt="Judge: ")
    assert str(BERT) in str(e.value)
    with pytest.raises(rlx.Error, match="prompt") as e:
        bert.predict([("q", "d")], prompt="Judge: ")
    assert str(BERT) in str(e.value)
    with pytest.raises(rlx.Error, match="no prompt named 'nope'"):
        qwen3.predict([("q", "d")], prompt_name="nope")
    with pytest.raises(TypeError, match="pairs must be a list of .query, document. pairs, not one str"):
        bert.predict("query and document")
    with pytest.raises(TypeError, match="pairs must be a list, not int"):
        bert.predict(42)
    with pytest.raises(TypeError, match=r"pairs\[1\] is int, not a \(query, document\) pair"):
        bert.predict([("q", "d"), 3])
    with pytest.raises(TypeError, match=r"pairs\[1\] is str, not a \(query, document\) pair"):
        bert.predict([("q", "d"), "q d"])
    with pytest.raises(ValueError, match=r"pairs\[0\] has 3 items; a pair is \(query, document\)"):
        bert.predict([("q", "d", "e")])
    with pytest.raises(ValueError, match=r"pairs has 3 items"):
        bert.predict(["q", "d", "e"])
    with pytest.raises(TypeError, match=r"pairs\[0\]\[1\] is bytes, not str"):
        bert.predict([("q", b"d")])
    with pytest.raises(ValueError, match="batch_size"):
        bert.predict([("q", "d")], batch_size=0)
    with pytest.raises(TypeError, match="rank: query is int, not str"):
        bert.rank(3, ["d"])
    with pytest.raises(TypeError, match="documents must be a list of str, not one str"):
        bert.rank("q", "d")
    with pytest.raises(TypeError, match=r"rank: documents\[1\] is NoneType, not str"):
        bert.rank("q", ["d", None])
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        bert.rank("q", ["d"], top_k=-1)
    # Still scoring after the errors.
    assert np.isfinite(bert.predict([("q", "d")])).all()


def test_the_gil_is_released_while_scoring(qwen3):
    pairs = [("What is the capital of France?", "passage number %d about Paris and France" % i) for i in range(300)]
    during = ticks_while(lambda: qwen3.predict(pairs))
    # Holding the GIL, predict would leave the counter a few switch intervals' worth.
    assert during > 100000, during
