#!/usr/bin/env python3
"""Writes tests/data/tiny_llama.gguf, a small LLaMA GGUF made the way
llama.cpp's converter makes one (Q and K rows permuted into rotation pairs;
weights in Q8_0, Q4_0, F16 and F32; the SentencePiece vocabulary of
spm_vocab.gguf), and tests/data/tiny_llama_reference.json: its greedy
continuation of a prompt and its first logits from the NumPy forward pass of
llama_numpy.py. The prompt's ids are sentencepiece's (spm_cases.json) after BOS.

    pip install gguf numpy
    python3 tests/data/make_tiny_llama.py
"""
import json
import pathlib
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from llama_numpy import GgufLlama  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parent
OUT = DATA / "tiny_llama.gguf"
REF = DATA / "tiny_llama_reference.json"
H, L, NH, NKV, FFN = 64, 2, 4, 2, 96
HD = H // NH

spm = gguf.GGUFReader(str(DATA / "spm_vocab.gguf"))
f = spm.fields
tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
V = len(tokens)

rng = np.random.default_rng(3)


def rand(*shape, scale=0.15):
    return rng.uniform(-scale, scale, size=shape).astype(np.float32)


def permute(w, heads):  # HF rows (2, hd/2) per head -> GGUF's (hd/2, 2)
    return w.reshape(heads, 2, HD // 2, -1).swapaxes(1, 2).reshape(w.shape)


w = gguf.GGUFWriter(str(OUT), "llama")
w.add_context_length(64)
w.add_embedding_length(H)
w.add_block_count(L)
w.add_feed_forward_length(FFN)
w.add_head_count(NH)
w.add_head_count_kv(NKV)
w.add_rope_freq_base(10000.0)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_dimension_count(HD)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_add_bos_token(True)


def put(name, x, qtype):
    if qtype in (T.F32, T.F16):
        w.add_tensor(name, x.astype(np.float32 if qtype == T.F32 else np.float16))
    else:
        w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)


put("token_embd.weight", rand(V, H, scale=0.5), T.Q8_0)
for l in range(L):
    p = f"blk.{l}."
    put(p + "attn_norm.weight", rng.uniform(0.8, 1.2, H).astype(np.float32), T.F32)
    put(p + "ffn_norm.weight", rng.uniform(0.8, 1.2, H).astype(np.float32), T.F32)
    put(p + "attn_q.weight", permute(rand(NH * HD, H), NH), T.Q8_0)
    put(p + "attn_k.weight", permute(rand(NKV * HD, H), NKV), T.Q4_0)
    put(p + "attn_v.weight", rand(NKV * HD, H), T.F16)
    put(p + "attn_output.weight", rand(H, NH * HD), T.Q8_0)
    put(p + "ffn_gate.weight", rand(FFN, H), T.Q4_0)
    put(p + "ffn_up.weight", rand(FFN, H), T.Q8_0)
    put(p + "ffn_down.weight", rand(H, FFN), T.Q4_0)
put("output_norm.weight", rng.uniform(0.8, 1.2, H).astype(np.float32), T.F32)
put("output.weight", rand(V, H, scale=0.5), T.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

case = json.loads((DATA / "spm_cases.json").read_text())[0]
model = GgufLlama(OUT)
ids = [1] + case["ids"]
prompt = list(ids)
generated, first = [], None
for step in range(8):
    logits = model.next_logits(ids)
    first = logits if first is None else first
    generated.append(int(np.argmax(logits)))
    ids.append(generated[-1])
REF.write_text(json.dumps({"prompt": case["text"], "prompt_ids": prompt, "generated_ids": generated,
                           "first_logits": [float(x) for x in first]}, indent=1) + "\n")
print(f"wrote {OUT} ({OUT.stat().st_size} bytes) and {REF}: {generated}")
