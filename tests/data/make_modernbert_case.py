#!/usr/bin/env python3
"""Writes tests/data/modernbert/: two random ModernBERT models of odd sizes
and what sentence-transformers computes with them.

  embed/     ModernBertModel as a sentence-transformers folder (Transformer,
             mean Pooling, Normalize): hidden 48, 3 heads, 3 layers (global,
             local, global: global_attn_every_n_layers 2), intermediate 40,
             local_attention 8 (keys within 4 tokens), no biases (the
             defaults), rotary thetas 5000 (global) and 100 (local).
  rerank/    ModernBertForSequenceClassification (one label, mean
             classifier pooling), hidden 36, 2 layers, every bias on,
             local_attention 6.
  reference.json  per text: the ids, SentenceTransformer.encode's vector;
             per pair: the ids, CrossEncoder.predict's score and the logit.
             Also a float64 forward written out below with the window
             |i - j| <= local_attention // 2 and with < instead: the first
             must match transformers, the second must not (the texts are
             longer than the window).

Both models share one byte-level BPE tokenizer trained here with
`tokenizers` (ModernBERT's own is byte-level BPE with [CLS] $A [SEP]).

    python3 tests/data/make_modernbert_case.py --out tests/data/modernbert
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch

CORPUS = [
    "A man is eating food.", "Someone is having a meal.", "The stock market fell sharply today.",
    "Quantum entanglement links particles across space.", "Cats sleep most of the day!",
    "rlx compiles transformer graphs into fused kernels.", "Der schnelle braune Fuchs springt.",
    "naïve café résumé", "1234 5678 90", "What is the capital of France?", "Paris is the capital of France.",
]
TEXTS = [
    "hello",
    "",
    "A man is eating food.",
    "The stock market fell sharply today, and the cats slept through all of it.",
    "rlx compiles transformer graphs into fused kernels; local attention sees only its neighbours.",
    "naïve café 中文 🙂 and 1234 5678",
    "Quantum entanglement links particles across space. What is the capital of France? Paris is.",
]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("What is the capital of France?", "Cats sleep most of the day, and the market fell sharply today."),
    ("hello", ""),
    ("A man is eating food.", "Someone is having a meal while the kernels are fused and compiled."),
]
MAX_LEN = 64


def tokenizer(path):
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast
    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator(CORPUS * 4, vocab_size=330, min_frequency=1,
                            special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok._tokenizer.post_processor = TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok._tokenizer, unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                                   model_max_length=MAX_LEN, model_input_names=["input_ids", "attention_mask"])
    fast.save_pretrained(path)
    return fast


def randomize(model, seed):
    # transformers' init (std 0.02) makes every output nearly the same; wider
    # weights and non-trivial norms make a wrong graph visible.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def config(vocab, tok, **kw):
    import transformers as T
    return T.ModernBertConfig(vocab_size=vocab, max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                              cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
                              bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                              norm_eps=1e-5, hidden_activation="gelu", **kw)


def forward64(model, ids, c, strict):
    """ModernBertModel's last hidden state in float64, one unpadded text.
    strict: the window |i - j| < local_attention // 2 (the wrong reading)."""
    sd = {k.removeprefix("model."): v.double() for k, v in model.state_dict().items()}
    H, heads = c.hidden_size, c.num_attention_heads
    d = H // heads
    n = len(ids)
    every = getattr(c, "global_attn_every_n_layers", None) or 1
    types = getattr(c, "layer_types", None)
    ropes = getattr(c, "rope_parameters", None)

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (H,), sd[name + ".weight"], sd.get(name + ".bias"), c.norm_eps)

    def lin(x, name):
        y = x @ sd[name + ".weight"].T
        return y + sd[name + ".bias"] if name + ".bias" in sd else y

    def rot(x, theta):
        inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        a = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = torch.cat([a.cos(), a.cos()], -1)[:, None], torch.cat([a.sin(), a.sin()], -1)[:, None]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    pos = torch.arange(n)
    dist = (pos[:, None] - pos[None, :]).abs()
    half = c.local_attention // 2
    near = dist < half if strict else dist <= half
    x = ln(sd["embeddings.tok_embeddings.weight"][torch.tensor(ids)], "embeddings.norm")
    for i in range(c.num_hidden_layers):
        p = f"layers.{i}."
        local = types[i] == "sliding_attention" if types else i % every != 0
        if isinstance(ropes, dict) and "full_attention" in ropes:
            theta = ropes["sliding_attention" if local else "full_attention"]["rope_theta"]
        else:
            theta = c.local_rope_theta if local else c.global_rope_theta
        h = x if i == 0 else ln(x, p + "attn_norm")
        q, k, v = lin(h, p + "attn.Wqkv").view(n, 3, heads, d).unbind(1)
        q, k = rot(q, theta), rot(k, theta)
        s = torch.einsum("qhd,khd->hqk", q, k) / d ** 0.5
        if local:
            s = s.masked_fill(~near[None], float("-inf"))
        ctx = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(n, H)
        x = x + lin(ctx, p + "attn.Wo")
        a, g = lin(ln(x, p + "mlp_norm"), p + "mlp.Wi").chunk(2, -1)
        x = x + lin(torch.nn.functional.gelu(a) * g, p + "mlp.Wo")
    return ln(x, "final_norm")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import sentence_transformers
    import transformers as T
    from sentence_transformers import CrossEncoder, SentenceTransformer, models
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    ref = {"versions": {"torch": torch.__version__, "transformers": T.__version__,
                        "sentence_transformers": sentence_transformers.__version__}}
    print(ref["versions"])

    # The embedding model.
    raw = os.path.join(a.out, "embed-hf")
    tok = tokenizer(raw)
    c = config(len(tok), tok, hidden_size=48, num_hidden_layers=3, num_attention_heads=3, intermediate_size=40,
               local_attention=8, global_attn_every_n_layers=2, global_rope_theta=5000.0, local_rope_theta=100.0)
    torch.manual_seed(1)
    m = T.ModernBertModel._from_config(c, attn_implementation="sdpa").eval()
    randomize(m, 1)
    m.save_pretrained(raw, safe_serialization=True)
    word = models.Transformer(raw, max_seq_length=MAX_LEN)
    st = SentenceTransformer(modules=[word, models.Pooling(48, pooling_mode="mean"), models.Normalize()], device="cpu")
    emb_dir = os.path.join(a.out, "embed")
    st.save(emb_dir)
    shutil.rmtree(raw)
    st = SentenceTransformer(emb_dir, device="cpu")
    got = st.encode(TEXTS, batch_size=3, convert_to_numpy=True)
    hf = getattr(st[0], "auto_model", None) or st[0].model
    print("attention implementation:", hf.config._attn_implementation)
    print("layer types:", getattr(hf.config, "layer_types", None), "rope:", getattr(hf.config, "rope_parameters", None))
    cases, worst, worst_strict = [], 1.0, 1.0
    for t, e in zip(TEXTS, got):
        ids = tok(t, truncation=True, max_length=MAX_LEN)["input_ids"]
        try:
            mine = forward64(hf, ids, hf.config, False).mean(0)
            strict = forward64(hf, ids, hf.config, True).mean(0)
            cos = lambda u, w: float(np.dot(u, w) / np.linalg.norm(u) / np.linalg.norm(w))
            worst = min(worst, cos(mine.numpy(), e))
            worst_strict = min(worst_strict, cos(strict.numpy(), e))
        except Exception as err:  # noqa: BLE001 - the reference stands without the check
            print("float64 forward failed:", repr(err)[:300])
            worst = worst_strict = float("nan")
        cases.append({"text": t, "ids": ids, "embedding": [float(f"{x:.7g}") for x in e]})
    print(f"float64 forward vs sentence-transformers: min cosine {worst:.8f} (|i-j| <= w/2), "
          f"{worst_strict:.8f} (|i-j| < w/2)")
    ref["window_check"] = {"inclusive_min_cosine": worst, "strict_min_cosine": worst_strict}
    ref["texts"] = cases

    # The cross-encoder.
    try:
        ce_dir = os.path.join(a.out, "rerank")
        tok2 = tokenizer(ce_dir)
        c2 = config(len(tok2), tok2, hidden_size=36, num_hidden_layers=2, num_attention_heads=3, intermediate_size=28,
                    local_attention=6, global_attn_every_n_layers=2, attention_bias=True, mlp_bias=True,
                    norm_bias=True, classifier_bias=True, classifier_pooling="mean", num_labels=1)
        torch.manual_seed(2)
        ce_model = T.ModernBertForSequenceClassification._from_config(c2, attn_implementation="sdpa").eval()
        randomize(ce_model, 2)
        ce_model.save_pretrained(ce_dir, safe_serialization=True)
        ce = CrossEncoder(ce_dir, device="cpu", max_length=MAX_LEN)
        scores = ce.predict(PAIRS)
        pairs = []
        for (q, p), s in zip(PAIRS, scores):
            enc = tok2(q, p, truncation=True, max_length=MAX_LEN, return_tensors="pt")
            with torch.no_grad():
                logit = ce_model(**enc).logits[0, 0].item()
            pairs.append({"query": q, "passage": p, "ids": enc["input_ids"][0].tolist(), "score": float(s),
                          "logit": logit})
        ref["pairs"] = pairs
    except Exception as err:  # noqa: BLE001 - the embedding half stands alone
        print("cross-encoder failed:", repr(err)[:500])
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
    print("written", a.out)


if __name__ == "__main__":
    main()
