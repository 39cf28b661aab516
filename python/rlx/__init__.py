"""rlx: transformer inference compiled and run by rlx, from Python.

    import rlx
    model = rlx.SentenceEncoder("models/all-MiniLM-L6-v2")
    embeddings = model.encode(["A sentence.", "Another one."])   # float32 [2, 384]

    reranker = rlx.CrossEncoder("cross-encoder/ms-marco-MiniLM-L6-v2")   # a Hub id in the local cache
    reranker.rank("Who wrote Hamlet?", ["Shakespeare wrote Hamlet.", "Paris is in France."])
    # [{'corpus_id': 0, 'score': ...}, {'corpus_id': 1, 'score': ...}]

    llm = rlx.LLM("models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
    for piece in llm.generate("Once upon a time", max_tokens=32, stream=True):
        print(piece, end="", flush=True)
"""

from ._rlx import (
    LLM,
    CrossEncoder,
    Error,
    Generation,
    GenerationStream,
    SentenceEncoder,
    Tokenizer,
    EmbeddingTokenizer,
)
from . import _rlx

__version__: str = _rlx.__version__  # rlx::version(), the CMake project's VERSION

__all__ = [
    "LLM",
    "CrossEncoder",
    "Error",
    "Generation",
    "GenerationStream",
    "SentenceEncoder",
    "Tokenizer",
    "EmbeddingTokenizer",
    "__version__",
]
