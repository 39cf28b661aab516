"""The package on a GPU (RLX_PYTHON_GPU=1, a wheel built with RLX_CUDA=ON):
embeddings and greedy tokens on CUDA against the same references as the CPU.
Elsewhere these tests are skipped; with RLX_PYTHON_GPU=1 and no GPU they fail.

The encoder is the checkout's all-MiniLM-L6-v2, or the sentence-transformers
directory RLX_GPU_TEST_ENCODER names (a machine without the downloaded models:
scripts/gpu-verify writes a random MiniLM-shaped one there). The decoder is the
committed tests/data/tiny_llama.gguf."""

import json
import os
import pathlib

import numpy as np
import pytest

import rlx
from conftest import DATA, MINILM, TINY_LLAMA, need

pytestmark = pytest.mark.skipif(os.environ.get("RLX_PYTHON_GPU") != "1",
                                reason="GPU tests: set RLX_PYTHON_GPU=1 on a machine with a GPU")


def encoder_dir():
    return os.environ.get("RLX_GPU_TEST_ENCODER") or need(MINILM)


def texts():
    """The committed reference's texts, and sentences of the model's own
    vocabulary (a random model's words are not English), odd lengths."""
    j = json.loads((DATA / "minilm_reference.json").read_text())
    out = [c["text"] for c in j["cases"]]
    vocab = [w for w in (pathlib.Path(encoder_dir()) / "vocab.txt").read_text().split() if w.isalpha()]
    rng = np.random.default_rng(7)
    out += [" ".join(rng.choice(vocab, int(k))) for k in rng.integers(1, 90, 37)]
    return out + ["", "a"]


def reference():
    j = json.loads((DATA / "minilm_reference.json").read_text())
    return [c["text"] for c in j["cases"]], np.array([c["embedding"] for c in j["cases"]], np.float64)


def cosine_rows(a, b):
    a = np.asarray(a, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_auto_is_cuda():
    enc = rlx.SentenceEncoder(encoder_dir())
    assert enc.device == "cuda"


@pytest.mark.parametrize("dtype,min_cos", [("f32", 0.9999), ("f16", 0.999), ("bf16", 0.99)])
def test_embeddings_on_cuda_match_the_cpu(dtype, min_cos):
    t = texts()
    got = rlx.SentenceEncoder(encoder_dir(), device="cuda", dtype=dtype).encode(t, batch_size=8)
    assert got.shape[0] == len(t) and np.isfinite(got).all() and (np.abs(got).max(1) > 0.01).all()
    cpu = rlx.SentenceEncoder(encoder_dir(), device="cpu").encode(t)
    assert cosine_rows(got, cpu).min() >= min_cos


@pytest.mark.parametrize("dtype,min_cos", [("f32", 0.9999), ("f16", 0.999), ("bf16", 0.99)])
def test_embeddings_on_cuda_match_the_reference(dtype, min_cos):
    if os.environ.get("RLX_GPU_TEST_ENCODER"):
        st = pytest.importorskip("sentence_transformers")
        t = texts()
        want = np.asarray(st.SentenceTransformer(encoder_dir(), device="cpu").encode(t), np.float64)
    else:
        t, want = reference()
    got = rlx.SentenceEncoder(encoder_dir(), device="cuda", dtype=dtype).encode(t, batch_size=8)
    assert got.shape == want.shape
    assert cosine_rows(got, want).min() >= min_cos


def test_greedy_tokens_on_cuda_equal_the_reference():
    ref = json.loads((DATA / "tiny_llama_reference.json").read_text())
    n = len(ref["generated_ids"])
    llm = rlx.LLM(need(TINY_LLAMA), device="cuda", dtype="f32")
    g = llm.generate(ref["prompt_ids"], max_tokens=n, ignore_eos=True)
    assert g.token_ids == ref["generated_ids"]
    assert llm.device == "cuda" and not llm.backend.startswith("host execution"), llm.backend
    pieces = list(llm.generate(ref["prompt_ids"], max_tokens=n, ignore_eos=True, stream=True))
    assert len(pieces) >= 2 and "".join(pieces) == g.text


def test_dlpack_hands_torch_the_device_rows_without_a_copy():
    torch = pytest.importorskip("torch")
    t = texts()
    enc = rlx.SentenceEncoder(encoder_dir(), device="cuda", dtype="f32")
    capsule = enc.encode(t, batch_size=8, convert_to="dlpack")
    a = torch.from_dlpack(capsule)  # wraps rlx's device buffer: a DLPack capsule is consumed once
    assert a.device.type == "cuda" and a.dtype == torch.float32 and tuple(a.shape) == (len(t), enc.dim)
    with pytest.raises(RuntimeError):
        torch.from_dlpack(capsule)
    cpu = rlx.SentenceEncoder(encoder_dir(), device="cpu").encode(t)
    got = a.cpu().numpy()
    assert np.isfinite(got).all() and cosine_rows(got, cpu).min() >= 0.9999
    b = a.view(-1)  # a view of the same device memory, writable
    b[0] = 123.0
    assert float(a[0, 0]) == 123.0 and a.data_ptr() == b.data_ptr()
    one = torch.from_dlpack(enc.encode(t[3], convert_to="dlpack"))
    assert tuple(one.shape) == (enc.dim,) and cosine_rows(one.cpu().numpy()[None], cpu[3:4]).min() >= 0.9999
