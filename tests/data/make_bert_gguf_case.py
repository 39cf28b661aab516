#!/usr/bin/env python3
"""Writes tests/data/bert_gguf/: a random BertModel of odd sizes as a
sentence-transformers folder, the same model as GGUF files written by
llama.cpp's converter, and what sentence-transformers computes with it.

  st/              BertModel (hidden 48, 3 heads, 2 layers, intermediate 100,
                   64 positions, 2 token types, layer_norm_eps 1e-5) with
                   mean Pooling and Normalize; a WordPiece vocabulary
                   made here from a small corpus (lowercasing, accents stripped).
  bert-f32.gguf    llama.cpp's convert_hf_to_gguf.py --outtype f32 of st/
  bert-f16.gguf    the same with --outtype f16 (matrices f16, norms and
                   biases f32, as the converter writes them)
  (nomic/)         a random NomicBertModel in nomic's checkpoint layout
                   (config.json keys n_embd, n_head, ...; attn.Wqkv,
                   mlp.fc11/fc12/fc2, norm1/2; no biases, SwiGLU, rotary
                   base 1000, as the converter requires of nomic-bert):
                   hidden 48, 3 heads, 2 layers, n_inner 100, the same
                   tokenizer, mean Pooling and Normalize.
  nomic-f32.gguf   the converter's --outtype f32 of nomic/ (the folder
                   itself is not kept)
  reference.json   per text: the Hugging Face tokenizer's ids,
                   SentenceTransformer.encode's vector of st/ and a float64
                   forward of nomic/ written out below (mean, normalized;
                   sentence-transformers would need nomic's remote code).

The converter runs as it is but for two answers it is given. It recognises
a BERT vocabulary by hashing how it tokenizes a fixed text, which it knows
only for published vocabularies; for the small vocabulary made here its
answer (the tokenizer.ggml.pre name, which WordPiece does not use) is given
as "bert-bge", what it writes for bge-small-en-v1.5 and all-MiniLM-L6-v2.
And transformers 5 reads model_type nomic_bert as its own NomicBertConfig,
which has none of nomic's keys, so for nomic/ the converter reads
config.json as written, as it does when AutoConfig cannot read a config.

    python3 tests/data/make_bert_gguf_case.py --out tests/data/bert_gguf \
        --llama-cpp /path/to/llama.cpp   # holds convert_hf_to_gguf.py, conversion/ and gguf-py/
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

CORPUS = [
    "A man is eating food.", "Someone is having a meal.", "The stock market fell sharply today.",
    "Quantum entanglement links particles across space.", "Cats sleep most of the day!",
    "rlx compiles transformer graphs into fused kernels.", "The quick brown fox jumps over the lazy dog.",
    "naive cafe resume", "1234 5678 90", "What is the capital of France?", "Paris is the capital of France.",
    "Embeddings map sentences to vectors; similar sentences get similar vectors.",
]
TEXTS = [
    "hello",
    "",
    "A man is eating food.",
    "The Stock Market fell SHARPLY today, and the cats slept through all of it.",
    "Naïve café résumé: accents are stripped, CASE is folded.",
    "unknownwordzzz and 中文 characters, plus [MASK] written in the text!",
    "Quantum entanglement links particles across space. What is the capital of France? Paris is. " * 4,
]
MAX_LEN = 64

CONVERT = r"""
import runpy, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/gguf-py"]
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "bert-bge"
if "nomic" in sys.argv[2]:
    class RawConfig:
        @staticmethod
        def from_pretrained(*a, **k):
            raise ValueError("config.json as written")
    base.AutoConfig = RawConfig
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def tokenizer(path):
    """A WordPiece vocabulary made from CORPUS in a fixed order (a trained
    one changes from run to run): the special tokens, every character alone
    and as a continuation, a few suffixes, and the corpus's words."""
    from tokenizers import BertWordPieceTokenizer
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer
    from transformers import BertTokenizerFast
    norm, pre = BertNormalizer(lowercase=True, strip_accents=True), BertPreTokenizer()
    words = sorted({w for t in CORPUS for w, _ in pre.pre_tokenize_str(norm.normalize_str(t))})
    chars = sorted({ch for w in words for ch in w})
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + ch for ch in chars]
    pieces += ["##ing", "##ed", "##s", "##ly", "##er", "##tion"] + [w for w in words if len(w) > 1]
    pieces = list(dict.fromkeys(pieces))  # "##s" is a character's too
    tok = BertWordPieceTokenizer({p: i for i, p in enumerate(pieces)}, lowercase=True, strip_accents=True)
    fast = BertTokenizerFast(tokenizer_object=tok._tokenizer, do_lower_case=True, unk_token="[UNK]",
                             cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                             model_max_length=MAX_LEN)
    fast.save_pretrained(path)
    return fast


def randomize(model, seed):
    # transformers' init (std 0.02) makes every output nearly the same; wider
    # weights and non-trivial norms make a wrong graph visible.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


NOMIC = {"architectures": ["NomicBertModel"], "model_type": "nomic_bert", "n_embd": 48, "n_layer": 2, "n_head": 3,
         "n_inner": 100, "n_positions": 8192, "max_trained_positions": 2048, "type_vocab_size": 2,
         "layer_norm_epsilon": 1e-5, "activation_function": "swiglu", "causal": False, "prenorm": False,
         "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False, "rotary_emb_fraction": 1.0,
         "rotary_emb_base": 1000, "rotary_emb_interleaved": False, "rotary_emb_scale_base": None,
         "pad_vocab_size_multiple": 1, "pad_token_id": 0}


def nomic_model(path, st_dir, vocab):
    """nomic's checkpoint layout with random weights, the tokenizer and
    sentence-transformers files of st_dir (mean pooling, Normalize)."""
    from safetensors.torch import save_file
    os.makedirs(path)
    for f in ("tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json"):
        shutil.copy(os.path.join(st_dir, f), path)
    for d in ("1_Pooling", "2_Normalize"):
        shutil.copytree(os.path.join(st_dir, d), os.path.join(path, d))
    c = dict(NOMIC, vocab_size=vocab)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    g = torch.Generator().manual_seed(3)
    H, I = c["n_embd"], c["n_inner"]
    r = lambda *shape: 0.15 * torch.randn(*shape, generator=g)
    n = lambda h: 1.0 + 0.2 * torch.randn(h, generator=g)
    w = {"embeddings.word_embeddings.weight": r(vocab, H), "embeddings.token_type_embeddings.weight": r(2, H),
         "emb_ln.weight": n(H), "emb_ln.bias": r(H)}
    for i in range(c["n_layer"]):
        p = f"encoder.layers.{i}."
        w[p + "attn.Wqkv.weight"], w[p + "attn.out_proj.weight"] = r(3 * H, H), r(H, H)
        w[p + "mlp.fc11.weight"], w[p + "mlp.fc12.weight"], w[p + "mlp.fc2.weight"] = r(I, H), r(I, H), r(H, I)
        for k in ("norm1", "norm2"):
            w[p + k + ".weight"], w[p + k + ".bias"] = n(H), r(H)
    save_file(w, os.path.join(path, "model.safetensors"))
    return {k: v.double() for k, v in w.items()}, c


def nomic_forward64(w, c, ids):
    """NomicBertModel's mean-pooled, normalized embedding in float64, one
    unpadded text: post-norm layers, rotary positions on q and k (halves
    rotated), out_proj, norm1, fc2(fc11(x) * silu(fc12(x))), norm2."""
    H, heads = c["n_embd"], c["n_head"]
    d, n = H // heads, len(ids)
    ln = lambda x, name: torch.nn.functional.layer_norm(x, (H,), w[name + ".weight"], w[name + ".bias"],
                                                        c["layer_norm_epsilon"])
    inv = 1.0 / (c["rotary_emb_base"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    a = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([a.cos(), a.cos()], -1)[:, None], torch.cat([a.sin(), a.sin()], -1)[:, None]
    rot = lambda x: x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin
    x = ln(w["embeddings.word_embeddings.weight"][torch.tensor(ids)] + w["embeddings.token_type_embeddings.weight"][0],
           "emb_ln")
    for i in range(c["n_layer"]):
        p = f"encoder.layers.{i}."
        q, k, v = (x @ w[p + "attn.Wqkv.weight"].T).view(n, 3, heads, d).unbind(1)
        s = torch.einsum("qhd,khd->hqk", rot(q), rot(k)) / d ** 0.5
        ctx = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(n, H)
        x = ln(ctx @ w[p + "attn.out_proj.weight"].T + x, p + "norm1")
        up, gate = x @ w[p + "mlp.fc11.weight"].T, x @ w[p + "mlp.fc12.weight"].T
        x = ln((up * torch.nn.functional.silu(gate)) @ w[p + "mlp.fc2.weight"].T + x, p + "norm2")
    e = x.mean(0)
    return (e / e.norm()).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--llama-cpp", required=True)
    a = ap.parse_args()
    import sentence_transformers
    import transformers as T
    from sentence_transformers import SentenceTransformer, models
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    ref = {"versions": {"torch": torch.__version__, "transformers": T.__version__,
                        "sentence_transformers": sentence_transformers.__version__}}
    print(ref["versions"])

    raw = os.path.join(a.out, "raw")
    tok = tokenizer(raw)
    c = T.BertConfig(vocab_size=len(tok), hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                     intermediate_size=100, max_position_embeddings=MAX_LEN, type_vocab_size=2,
                     layer_norm_eps=1e-5, hidden_act="gelu", pad_token_id=tok.pad_token_id)
    torch.manual_seed(1)
    m = T.BertModel(c, add_pooling_layer=False).eval()
    randomize(m, 1)
    m.save_pretrained(raw, safe_serialization=True)
    word = models.Transformer(raw, max_seq_length=MAX_LEN)
    st = SentenceTransformer(modules=[word, models.Pooling(48, pooling_mode="mean"), models.Normalize()],
                             device="cpu")
    st_dir = os.path.join(a.out, "st")
    st.save(st_dir)
    shutil.rmtree(raw)
    for extra in ("README.md",):
        if os.path.exists(os.path.join(st_dir, extra)):
            os.remove(os.path.join(st_dir, extra))

    for outtype in ("f32", "f16"):
        out = os.path.join(a.out, f"bert-{outtype}.gguf")
        subprocess.run([sys.executable, "-c", CONVERT, a.llama_cpp, st_dir, "--outtype", outtype,
                        "--outfile", out], check=True)

    nomic_dir = os.path.join(a.out, "nomic")
    nomic_w, nomic_c = nomic_model(nomic_dir, st_dir, len(tok))
    subprocess.run([sys.executable, "-c", CONVERT, a.llama_cpp, nomic_dir, "--outtype", "f32",
                    "--outfile", os.path.join(a.out, "nomic-f32.gguf")], check=True)
    shutil.rmtree(nomic_dir)  # the GGUF and the float64 forward below are what the tests read

    st = SentenceTransformer(st_dir, device="cpu")
    got = st.encode(TEXTS, batch_size=3, convert_to_numpy=True)
    cases = []
    for t, e in zip(TEXTS, got):
        ids = tok(t, truncation=True, max_length=MAX_LEN)["input_ids"]
        nomic = nomic_forward64(nomic_w, nomic_c, ids)
        cases.append({"text": t, "ids": ids, "embedding": [float(f"{x:.8g}") for x in e],
                      "nomic": [float(f"{x:.8g}") for x in nomic]})
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        f.write('{"versions": %s,\n "texts": [\n  ' % json.dumps(ref["versions"]))
        f.write(",\n  ".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n ]}\n")
    for root, _, files in os.walk(a.out):
        for n in files:
            print(os.path.relpath(os.path.join(root, n), a.out), os.path.getsize(os.path.join(root, n)))


if __name__ == "__main__":
    main()
