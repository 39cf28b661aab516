#!/usr/bin/env python3
"""Writes tests/data/qwen3_embed/: a random Qwen3 decoder of odd sizes as a
sentence-transformers folder (the layout of Qwen3-Embedding) and its
embeddings.

  The folder   Qwen3Model (hidden 48, 3 query heads sharing 1 KV head,
               head_dim 16, 2 layers, intermediate 40, tied embeddings,
               rope_theta 1000; tensors without the "model." prefix, as the
               Transformer module saves them), last-token Pooling, Normalize,
               and config_sentence_transformers.json's prompts
               {"query": "Instruct: ...\\nQuery:", "document": ""}.
               The tokenizer is byte-level BPE trained here with `tokenizers`,
               shaped like Qwen's: NFC normalizer, Qwen2's Split regex then
               ByteLevel, a TemplateProcessing post_processor that appends
               <|endoftext|>, padding on the LEFT (tokenizer_config.json).
  reference.json
               per text: its ids (HF `tokenizers`), the vector without a
               prompt and with the "query" prompt, and with mean pooling +
               Normalize in place of last-token pooling. The vectors come
               from the float64 NumPy forward below, which is also run on
               one left-padded batch of all texts (positions 0..n-1 over the
               pads, pads masked as keys, as transformers runs it) and must
               agree there. Where sentence-transformers is installed, its
               encode() of the folder (one batch, so padded) must agree with
               them within 1e-5 (st_max_abs_diff).

  --family qwen2 writes tests/data/qwen2_embed/ the same way for gte-Qwen2's
  family: Qwen2Model (hidden 40, 5 query heads on 1 KV head, head_dim 8,
  q/k/v biases, no q/k norms) in f16, the post_processor a Sequence of
  ByteLevel and the template.

    pip install numpy tokenizers   # + sentence-transformers for the cross-check
    python3 tests/data/make_qwen3_embedding_case.py --out tests/data/qwen3_embed
    python3 tests/data/make_qwen3_embedding_case.py --family qwen2 --out tests/data/qwen2_embed
"""
import argparse
import json
import os
import shutil

import numpy as np

CORPUS = [
    "A man is eating food.", "Someone is having a meal.", "The stock market fell sharply today.",
    "Quantum entanglement links particles across space.", "Cats sleep most of the day!",
    "rlx compiles transformer graphs into fused kernels.", "What is the capital of France?",
    "Paris is the capital of France.", "Given a question, retrieve passages that answer it",
    "Instruct: Query: naïve café résumé 1234",
]
# Different lengths in one batch: padding must not change any vector. The
# second "café" is written decomposed (e + U+0301): NFC makes it the first.
TEXTS = [
    "hello",
    "",
    "What is the capital of France?",
    "The stock market fell sharply today, and the cats slept through all of it while rlx fused kernels.",
    "Paris is the capital of France.",
    "naïve cafe\u0301 中文 🙂 and 1234 5678",
]
PROMPTS = {"query": "Instruct: Given a question, retrieve passages that answer it\nQuery:", "document": ""}
MAX_LEN = 128
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
EOS = "<|endoftext|>"
EPS, THETA = 1e-6, 1000.0
# Qwen3 (Qwen3-Embedding): per-head q/k RMSNorm, a free head_dim, f32.
# Qwen2 (gte-Qwen2): q/k/v biases, head_dim = hidden / heads, f16 weights,
# the post_processor a Sequence of ByteLevel and the template.
FAMILIES = {
    "qwen3": dict(H=48, NH=3, NKV=1, HD=16, LAYERS=2, FFN=40, QK_NORM=True, QKV_BIAS=False, DTYPE="F32",
                  ARCH="Qwen3Model", POST_SEQUENCE=False),
    "qwen2": dict(H=40, NH=5, NKV=1, HD=8, LAYERS=2, FFN=24, QK_NORM=False, QKV_BIAS=True, DTYPE="F16",
                  ARCH="Qwen2Model", POST_SEQUENCE=True),
}
globals().update(FAMILIES["qwen3"])


def tokenizer(path):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.processors import TemplateProcessing
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=360, min_frequency=1, special_tokens=[EOS, "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    eos = tok.token_to_id(EOS)
    templ = TemplateProcessing(single=f"$A:0 {EOS}:0", pair=f"$A:0 {EOS}:0 $B:1 {EOS}:1", special_tokens=[(EOS, eos)])
    tok.post_processor = (processors.Sequence([processors.ByteLevel(trim_offsets=False), templ]) if POST_SEQUENCE
                          else templ)
    tok.save(os.path.join(path, "tokenizer.json"))
    return tok


def safetensors_write(path, tensors, dtype):
    """model.safetensors as the safetensors package writes it (F32 or F16, little endian)."""
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4" if dtype == "F32" else "<f2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def weights(vocab, seed):
    """The base model's tensors (no "model." prefix: the Transformer module saves
    the base model), wider than transformers' init so a wrong graph shows."""
    rng = np.random.default_rng(seed)
    rand = lambda *s: (0.15 * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    norm = lambda n: (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    w = {"embed_tokens.weight": rand(vocab, H)}
    for i in range(LAYERS):
        p = f"layers.{i}."
        w.update({p + "input_layernorm.weight": norm(H), p + "self_attn.q_proj.weight": rand(NH * HD, H),
                  p + "self_attn.k_proj.weight": rand(NKV * HD, H), p + "self_attn.v_proj.weight": rand(NKV * HD, H)})
        if QK_NORM:
            w.update({p + "self_attn.q_norm.weight": norm(HD), p + "self_attn.k_norm.weight": norm(HD)})
        w.update({p + "self_attn.o_proj.weight": rand(H, NH * HD), p + "post_attention_layernorm.weight": norm(H),
                  p + "mlp.gate_proj.weight": rand(FFN, H), p + "mlp.up_proj.weight": rand(FFN, H),
                  p + "mlp.down_proj.weight": rand(H, FFN)})
        if QKV_BIAS:
            w.update({p + "self_attn.q_proj.bias": rand(NH * HD), p + "self_attn.k_proj.bias": rand(NKV * HD),
                      p + "self_attn.v_proj.bias": rand(NKV * HD)})
    w["norm.weight"] = norm(H)
    if DTYPE == "F16":  # the reference computes with the values the file holds
        w = {k: v.astype(np.float16).astype(np.float32) for k, v in w.items()}
    return w


def forward64(w, ids, mask=None):
    """The base model's final-normed hidden states in float64: [n, H] for one
    text, or, with mask, a padded batch [b, n, H] as transformers runs it
    (positions 0..n-1 whatever the padding, pads masked as keys)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    ids = np.atleast_2d(np.asarray(ids))
    b, n = ids.shape
    mask = np.ones((b, n), bool) if mask is None else np.asarray(mask, bool)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * g

    inv = THETA ** (-np.arange(0, HD, 2, dtype=np.float64) / HD)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rot(x):  # [b, n, heads, HD], halves rotated
        x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    allowed = np.tril(np.ones((n, n), bool))[None] & mask[:, None, :]  # [b, q, k]
    x = w["embed_tokens.weight"][ids]
    for i in range(LAYERS):
        p = f"layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        def proj(name, heads):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            if QKV_BIAS:
                y = y + w[p + f"self_attn.{name}_proj.bias"]
            return y.reshape(b, n, heads, HD)

        q, k, v = proj("q", NH), proj("k", NKV), proj("v", NKV)
        if QK_NORM:
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k = rot(q), rot(k)
        k, v = np.repeat(k, NH // NKV, 2), np.repeat(v, NH // NKV, 2)
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(HD)
        # -1e30, not -inf: a pad's query row, every key masked, stays finite.
        s = np.where(allowed[:, None], s, -1e30)
        pr = np.exp(s - s.max(-1, keepdims=True))
        pr /= pr.sum(-1, keepdims=True)
        ctx = np.einsum("bhqk,bkhd->bqhd", pr, v).reshape(b, n, NH * HD)
        x = x + ctx @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["norm.weight"])
    return x[0] if b == 1 else x


def unit(v):
    return v / max(np.linalg.norm(v), 1e-12)


def vec(e):
    return [float(f"{x:.8g}") for x in e]


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="qwen3")
    a = ap.parse_args()
    globals().update(FAMILIES[a.family])
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    tok = tokenizer(a.out)
    eos = tok.token_to_id(EOS)
    vocab = tok.get_vocab_size()
    w = weights(vocab, 3)
    safetensors_write(os.path.join(a.out, "model.safetensors"), w, DTYPE)
    config = {
        "architectures": [ARCH], "model_type": a.family, "vocab_size": vocab, "hidden_size": H,
        "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": NH,
        "num_key_value_heads": NKV, "head_dim": HD, "hidden_act": "silu", "max_position_embeddings": 160,
        "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": None, "tie_word_embeddings": True,
        "attention_bias": False, "attention_dropout": 0.0, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": LAYERS, "bos_token_id": None, "eos_token_id": eos, "pad_token_id": eos,
        "torch_dtype": "float32" if DTYPE == "F32" else "float16", "use_cache": True, "initializer_range": 0.02}
    if a.family == "qwen2":  # Qwen2Config has no head_dim (hidden / heads) and no o_proj bias flag
        assert HD * NH == H
        del config["head_dim"], config["attention_bias"]
    write_json(os.path.join(a.out, "config.json"), config)
    write_json(os.path.join(a.out, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": EOS,
        "padding_side": "left", "model_max_length": MAX_LEN, "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"]})
    write_json(os.path.join(a.out, "special_tokens_map.json"), {"eos_token": "<|im_end|>", "pad_token": EOS})
    write_json(os.path.join(a.out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
    write_json(os.path.join(a.out, "1_Pooling", "config.json"), {
        "word_embedding_dimension": H, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True})
    write_json(os.path.join(a.out, "2_Normalize", "config.json"),
               {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"})
    write_json(os.path.join(a.out, "sentence_bert_config.json"), {"max_seq_length": MAX_LEN, "do_lower_case": False})
    write_json(os.path.join(a.out, "config_sentence_transformers.json"), {
        "__version__": {"sentence_transformers": "5.1.0"}, "prompts": PROMPTS, "default_prompt_name": None,
        "similarity_fn_name": "cosine", "model_type": "SentenceTransformer"})

    # sentence-transformers 5 strips each text (prompt included), then the
    # tokenizer appends <|endoftext|>; last-token pooling takes it.
    ref = {"source": f"float64 NumPy forward of {ARCH} (this script); sentence-transformers' vectors where "
                     "it ran (st_max_abs_diff)", "prompts": PROMPTS, "padding_side": "left", "texts": []}
    batch = {}
    for key, prompt in (("", ""), ("query_", PROMPTS["query"])):
        ids = [tok.encode((prompt + t).strip()).ids for t in TEXTS]
        assert all(len(i) <= MAX_LEN and i[-1] == eos for i in ids)
        # One left-padded batch as the tokenizer pads it: the same vectors.
        n = max(len(i) for i in ids)
        padded = np.array([[eos] * (n - len(i)) + i for i in ids])
        mask = np.array([[0] * (n - len(i)) + [1] * len(i) for i in ids])
        hidden = forward64(w, padded, mask)
        for r, i in enumerate(ids):
            alone = forward64(w, i)
            drift = float(np.abs(hidden[r, n - len(i):] - alone).max())
            assert drift < 1e-9, f"left padding changed text {r} by {drift}"
            batch.setdefault(r, {})[key + "ids"] = i
            batch[r][key + "embedding"] = unit(alone[-1])
            if not key:
                batch[r]["mean_embedding"] = unit(alone.mean(0))
    for r, t in enumerate(TEXTS):
        b = batch[r]
        ref["texts"].append({"text": t, "ids": b["ids"], "query_ids": b["query_ids"], "embedding": vec(b["embedding"]),
                             "query_embedding": vec(b["query_embedding"]), "mean_embedding": vec(b["mean_embedding"])})
    try:  # where sentence-transformers is installed: its vectors must be these
        from sentence_transformers import SentenceTransformer, models
        st = SentenceTransformer(a.out, device="cpu").float()  # f16 weights (qwen2) computed in f32
        got = st.encode(TEXTS, batch_size=16, convert_to_numpy=True)  # one batch: padded
        got_q = st.encode(TEXTS, prompt_name="query", batch_size=16, convert_to_numpy=True)
        mean = SentenceTransformer(modules=[st[0], models.Pooling(H, pooling_mode="mean"), models.Normalize()],
                                   device="cpu").encode(TEXTS, batch_size=16, convert_to_numpy=True)
        diff = 0.0
        for r, c in enumerate(ref["texts"]):
            for name, v in (("embedding", got), ("query_embedding", got_q), ("mean_embedding", mean)):
                diff = max(diff, float(np.abs(np.array(c[name]) - v[r]).max()))
        ref["st_max_abs_diff"] = diff
        print("sentence-transformers vs the float64 forward: max |diff|", diff)
        assert diff < 1e-5, diff
    except ImportError:
        print("sentence-transformers is not installed: the float64 forward alone is the reference")
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f, ensure_ascii=False)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(a.out) for n in ns)
    print("written", a.out, total, "bytes")


if __name__ == "__main__":
    main()
