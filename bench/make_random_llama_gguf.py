#!/usr/bin/env python3
"""The LLaMA case of make_random_decoder_gguf.py (TinyLlama-1.1B shapes by
default), kept under this name for the scripts that call it; same flags,
same bytes.

  python3 bench/make_random_llama_gguf.py out.gguf --vocab-file models/ggml-vocab/ggml-vocab-llama-spm.gguf \\
      --gguf-py /path/to/llama.cpp/gguf-py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_random_decoder_gguf import main  # noqa: E402

if __name__ == "__main__":
    main(["--arch", "llama"] + sys.argv[1:])
