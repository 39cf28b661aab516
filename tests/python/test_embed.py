"""rlx.SentenceEncoder against sentence-transformers' reference vectors and
`rlx embed`'s output, on the default model (all-MiniLM-L6-v2, CPU)."""

import json
import os
import shutil
import threading

import numpy as np
import pytest

import rlx
from conftest import DATA, MINILM, need, run_cli, ticks_while


def reference():
    j = json.loads((DATA / "minilm_reference.json").read_text())
    texts = [c["text"] for c in j["cases"]]
    want = np.array([c["embedding"] for c in j["cases"]], dtype=np.float32)
    return j, texts, want


def cosine_rows(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def check_real(x):
    """Written, finite, not all zero: an unwritten output fails here."""
    assert np.isfinite(x).all()
    assert (np.abs(x).max(axis=-1) > 0.01).all()


def test_matches_sentence_transformers_reference(encoder):
    j, texts, want = reference()
    assert len(texts) >= 12 and "" in texts  # an empty string among them
    got = encoder.encode(texts)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (len(texts), 384)
    check_real(got)
    assert cosine_rows(got, want).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert encoder.max_seq_length == j["max_seq_length"] == 256
    assert encoder.dim == encoder.get_sentence_embedding_dimension() == 384
    assert encoder.normalizes
    # Distinct sentences stay apart.
    assert cosine_rows(got[:1], got[1:2])[0] < 0.9


def test_equals_the_command_line(encoder):
    texts = ["The quick brown fox.", "", "Ünïcödé and 数字 42", "The quick brown fox.", "a " * 300]
    out = run_cli("embed", "--format", "compact", "--threads", "1", "--device", "cpu", "--model", str(MINILM), *texts)
    cli = np.array([json.loads(line) for line in out.splitlines()], dtype=np.float32)
    got = encoder.encode(texts)
    assert cli.shape == got.shape == (5, 384)
    check_real(got)
    # The CLI prints 7 significant digits.
    np.testing.assert_allclose(got, cli, rtol=2e-6, atol=2e-8)


def test_rows_keep_input_order_with_empty_and_duplicate_strings(encoder):
    texts = ["first", "", "a much longer sentence that needs more tokens than the others", "first", "", "z"]
    got = encoder.encode(texts, batch_size=2)  # several runs, reordered by length inside
    assert got.shape == (6, 384)
    check_real(got)
    for i, t in enumerate(texts):
        alone = encoder.encode([t])
        assert cosine_rows(got[i : i + 1], alone)[0] >= 0.99999, t
    np.testing.assert_allclose(got[0], got[3], atol=1e-6)
    np.testing.assert_allclose(got[1], got[4], atol=1e-6)
    # The rows are not one vector repeated.
    assert cosine_rows(got[0:1], got[1:2])[0] < 0.95
    assert cosine_rows(got[2:3], got[5:6])[0] < 0.95


def test_shapes_like_sentence_transformers(encoder):
    one = encoder.encode("hello")
    assert one.shape == (384,) and one.dtype == np.float32
    np.testing.assert_allclose(one, encoder.encode(["hello"])[0], atol=1e-7)
    empty = encoder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    rows = encoder.encode(("a", "b"), convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == 2 and rows[0].shape == (384,)
    np.testing.assert_allclose(np.stack(rows), encoder.encode(["a", "b"]), atol=1e-7)
    # Any iterable of str.
    np.testing.assert_allclose(encoder.encode(iter(["a", "b"])), encoder.encode(["a", "b"]), atol=1e-7)


def test_convert_to_on_the_cpu_is_the_numpy_array(encoder):
    want = encoder.encode(["a", "bc d"])
    for kind in ("numpy", "dlpack"):
        got = encoder.encode(["a", "bc d"], convert_to=kind, convert_to_numpy=False)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.from_dlpack(encoder.encode(["a", "bc d"], convert_to="dlpack")), want)
    with pytest.raises(ValueError, match="convert_to must be None, 'numpy' or 'dlpack', not 'torch'"):
        encoder.encode(["a"], convert_to="torch")


def test_batch_size_does_not_change_the_vectors(encoder):
    _, texts, want = reference()
    base = encoder.encode(texts, batch_size=32)
    for b in (1, 3, 8, 100, 2000):  # 3 runs as 2, 100 as 64, 2000 as 1024
        got = encoder.encode(texts, batch_size=b)
        np.testing.assert_allclose(got, base, atol=2e-5, err_msg=f"batch_size {b}")
        assert cosine_rows(got, want).min() >= 0.9999


def test_prompt_is_put_before_every_sentence(encoder):
    got = encoder.encode(["what is rlx", "cats"], prompt="query: ")
    want = encoder.encode(["query: what is rlx", "query: cats"])
    np.testing.assert_allclose(got, want, atol=1e-7)
    assert cosine_rows(got[:1], encoder.encode(["what is rlx"]))[0] < 0.9999


def test_normalize_embeddings_on_a_model_without_normalize(tmp_path, encoder):
    # The default model without its Normalize module: the same directions, other lengths.
    d = tmp_path / "minilm-no-normalize"
    d.mkdir()
    for entry in os.listdir(need(MINILM)):
        if (MINILM / entry).is_dir():
            shutil.copytree(MINILM / entry, d / entry)  # module folders must lie inside the model's
        elif entry != "modules.json":
            os.symlink(MINILM / entry, d / entry)
    modules = json.loads((MINILM / "modules.json").read_text())
    (d / "modules.json").write_text(json.dumps([m for m in modules if not m["type"].endswith("Normalize")]))
    raw_model = rlx.SentenceEncoder(str(d), device="cpu", threads=1)
    assert not raw_model.normalizes
    texts = ["The quick brown fox.", "A second, different sentence."]
    raw = raw_model.encode(texts)
    norms = np.linalg.norm(raw, axis=1)
    assert (np.abs(norms - 1) > 0.05).all(), norms
    np.testing.assert_allclose(raw_model.encode(texts, normalize_embeddings=False), raw, atol=1e-7)
    unit = raw_model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(unit, raw / norms[:, None], atol=1e-6)
    np.testing.assert_allclose(unit, encoder.encode(texts), atol=1e-5)  # as the model with Normalize
    np.testing.assert_allclose(encoder.encode(texts, normalize_embeddings=True), encoder.encode(texts), atol=1e-7)


def test_similarity_is_the_cosine_matrix(encoder):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 37)).astype(np.float32)
    b = rng.standard_normal((3, 37)).astype(np.float64)  # converted
    s = rlx.SentenceEncoder.similarity(a, b)
    want = (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T
    assert s.shape == (5, 3) and s.dtype == np.float32
    np.testing.assert_allclose(s, want, atol=1e-5)
    e = encoder.encode(["cat", "a cat", "stock market"])
    m = encoder.similarity(e, e)
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-5)
    assert m[0, 1] > m[0, 2] + 0.1
    np.testing.assert_allclose(encoder.similarity(e[0], e), m[:1], atol=1e-6)  # a vector is one row
    with pytest.raises(ValueError, match="columns"):
        encoder.similarity(a, a[:, :5])


def test_tokenizer(encoder):
    tok = encoder.tokenizer
    vocab = json.loads((MINILM / "tokenizer.json").read_text())["model"]["vocab"]
    assert tok.vocab_size == len(tok) == len(vocab)
    ids = tok.encode("Hello, World!")
    assert ids == [vocab["[CLS]"], vocab["hello"], vocab[","], vocab["world"], vocab["!"], vocab["[SEP]"]]
    assert tok.tokenize("Hello, World!") == ids[1:-1]
    assert tok.token_id("hello") == vocab["hello"] and tok.token_id("no-such-token") == -1
    assert len(tok.encode("word " * 1000, max_length=10)) == 10


def test_errors_are_python_exceptions(tmp_path, encoder):
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        rlx.SentenceEncoder(str(tmp_path / "no-such-model"))
    with pytest.raises(ValueError, match="dtype must be"):
        rlx.SentenceEncoder(need(MINILM), dtype="f8")
    with pytest.raises(ValueError, match="device must be"):
        rlx.SentenceEncoder(need(MINILM), device="tpu")
    # A directory without the model's files: rlx's message names what is missing.
    (tmp_path / "empty").mkdir()
    with pytest.raises(rlx.Error, match="config.json") as e:
        rlx.SentenceEncoder(str(tmp_path / "empty"))
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(TypeError, match=r"sentences\[1\] is int"):
        encoder.encode(["fine", 3])
    with pytest.raises(TypeError, match="sentences must be a str"):
        encoder.encode(42)
    with pytest.raises(TypeError):
        encoder.encode([b"bytes are not text"])
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(["a"], batch_size=0)
    # The encoder still works after the errors.
    check_real(encoder.encode(["still here"]))


def test_a_hub_id_is_found_in_the_hugging_face_cache(tmp_path, monkeypatch, encoder):
    # The layout huggingface_hub writes: refs/main names the snapshot.
    repo = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("5f3c1e2d")
    (repo / "snapshots").mkdir()
    os.symlink(need(MINILM), repo / "snapshots" / "5f3c1e2d")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cached = rlx.SentenceEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu", threads=1)
    np.testing.assert_array_equal(cached.encode(["a cached model"]), encoder.encode(["a cached model"]))
    with pytest.raises(FileNotFoundError, match=r"'sentence-transformers/all-MiniLM-L6-v2@v9' is not a directory "
                                                r"and is not in the Hugging Face cache; looked in"):
        rlx.SentenceEncoder("sentence-transformers/all-MiniLM-L6-v2@v9")


def test_four_threads_on_one_encoder_equal_one(encoder):
    _, texts, _ = reference()
    inputs = [texts[i:] + texts[:i] for i in range(4)]
    want = [encoder.encode(t, batch_size=4) for t in inputs]
    got = [None] * 4
    errors = []

    def work(i):
        try:
            for _ in range(3):
                r = encoder.encode(inputs[i], batch_size=4)
                if got[i] is not None:
                    assert np.array_equal(r, got[i])
                got[i] = r
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        assert np.array_equal(got[i], want[i]), f"thread {i}"


def test_the_gil_is_released_while_encoding(encoder):
    texts = ["a sentence of a few words to embed, number %d" % i for i in range(400)]
    during = ticks_while(lambda: encoder.encode(texts))
    # Holding the GIL, encode would leave the counter a few switch intervals' worth.
    assert during > 100000, during


def test_int8_products_stay_close_to_f32(encoder):
    """quantize='int8' (the CLI's --quantize int8): every committed sentence
    within cosine 0.99 of sentence-transformers' f32 vector, not identical to
    rlx's f32 one (the int8 path ran); CUDA and other names refused."""
    _, texts, want = reference()
    q = rlx.SentenceEncoder(need(MINILM), device="auto", dtype="bf16", threads=1, quantize="int8")
    assert q.quantize == "int8" and q.device == "cpu" and encoder.quantize is None
    assert "quantize='int8'" in repr(q)
    got = q.encode(texts)
    check_real(got)
    assert cosine_rows(got, want).min() >= 0.99
    assert cosine_rows(got, encoder.encode(texts)).min() < 0.99999
    with pytest.raises(ValueError, match="int8"):
        rlx.SentenceEncoder(need(MINILM), device="cpu", quantize="int4")
    with pytest.raises(ValueError, match="CPU only"):
        rlx.SentenceEncoder(need(MINILM), device="cuda", quantize="int8")
