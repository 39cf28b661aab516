"""The package on a GPU (RLX_PYTHON_GPU=1, a wheel built with RLX_CUDA=ON):
embeddings and greedy tokens on CUDA against the same references as the CPU.
Elsewhere these tests are skipped; with RLX_PYTHON_GPU=1 and no GPU they fail."""

import json
import os

import numpy as np
import pytest

import rlx
from conftest import DATA, MINILM, SMOLLM2, need

pytestmark = pytest.mark.skipif(os.environ.get("RLX_PYTHON_GPU") != "1",
                                reason="GPU tests: set RLX_PYTHON_GPU=1 on a machine with a GPU")


def reference():
    j = json.loads((DATA / "minilm_reference.json").read_text())
    return [c["text"] for c in j["cases"]], np.array([c["embedding"] for c in j["cases"]], np.float64)


def cosine_rows(a, b):
    a = np.asarray(a, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_auto_is_cuda():
    enc = rlx.SentenceEncoder(need(MINILM))
    assert enc.device == "cuda"


@pytest.mark.parametrize("dtype,min_cos", [("f32", 0.9999), ("f16", 0.999), ("bf16", 0.99)])
def test_embeddings_on_cuda_match_the_reference(dtype, min_cos):
    texts, want = reference()
    enc = rlx.SentenceEncoder(need(MINILM), device="cuda", dtype=dtype)
    got = enc.encode(texts, batch_size=8)
    assert got.shape == want.shape and np.isfinite(got).all() and (np.abs(got).max(1) > 0.01).all()
    assert cosine_rows(got, want).min() >= min_cos
    cpu = rlx.SentenceEncoder(need(MINILM), device="cpu").encode(texts)
    assert cosine_rows(got, cpu).min() >= min_cos


def test_greedy_tokens_on_cuda_equal_the_reference():
    ref = json.loads((DATA / "smollm2_reference.json").read_text())
    llm = rlx.LLM(need(SMOLLM2), device="cuda", dtype="f32", ctx_size=512)
    g = llm.generate(ref["prompt"], max_tokens=6)
    assert g.token_ids == ref["generated_ids"][:6]
    pieces = list(llm.generate(ref["prompt"], max_tokens=24, stream=True))
    assert "".join(pieces) == llm.generate(ref["prompt"], max_tokens=24).text
    assert llm.device == "cuda" and not llm.backend.startswith("host execution"), llm.backend
