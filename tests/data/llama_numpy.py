"""A LLaMA forward pass in NumPy (float64) over a GGUF's weights, for the
reference scripts: the `gguf` package dequantizes every tensor, Q and K
weights are un-permuted back to Hugging Face's layout, and RoPE rotates
halves (dim i with i + head_dim/2), independently of how rlx reads GGUF."""
import numpy as np
import gguf
from gguf.quants import dequantize


class GgufLlama:
    def __init__(self, path):
        r = gguf.GGUFReader(str(path))
        meta = lambda k: r.fields[k].contents()  # noqa: E731
        self.H = meta("llama.embedding_length")
        self.L = meta("llama.block_count")
        self.NH = meta("llama.attention.head_count")
        self.NKV = meta("llama.attention.head_count_kv")
        self.HD = self.H // self.NH
        self.EPS = meta("llama.attention.layer_norm_rms_epsilon")
        self.THETA = meta("llama.rope.freq_base")
        self.W = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64)
                  .reshape([int(d) for d in reversed(t.shape)]) for t in r.tensors}
        for l in range(self.L):
            self.W[f"blk.{l}.attn_q.weight"] = self.unpermute(self.W[f"blk.{l}.attn_q.weight"], self.NH)
            self.W[f"blk.{l}.attn_k.weight"] = self.unpermute(self.W[f"blk.{l}.attn_k.weight"], self.NKV)
        self.EMB = self.W["token_embd.weight"]
        self.HEAD = self.W.get("output.weight", self.EMB)

    def unpermute(self, w, heads):
        # GGUF stores the rows of each head as (hd/2, 2) pairs; HF as (2, hd/2).
        return w.reshape(heads, self.HD // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.EPS) * w

    def rope(self, x):  # x: [S, heads, HD]
        s, hd = x.shape[0], self.HD
        inv = self.THETA ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def next_logits(self, ids):
        W, s, NH, NKV, HD = self.W, len(ids), self.NH, self.NKV, self.HD
        x = self.EMB[ids]
        mask = np.triu(np.full((s, s), -np.inf), 1)
        for l in range(self.L):
            p = f"blk.{l}."
            h = self.rms(x, W[p + "attn_norm.weight"])
            q = self.rope((h @ W[p + "attn_q.weight"].T).reshape(s, NH, HD))
            k = self.rope((h @ W[p + "attn_k.weight"].T).reshape(s, NKV, HD))
            v = (h @ W[p + "attn_v.weight"].T).reshape(s, NKV, HD)
            k = np.repeat(k, NH // NKV, axis=1)
            v = np.repeat(v, NH // NKV, axis=1)
            att = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(HD) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = np.einsum("hqk,khd->qhd", att, v).reshape(s, NH * HD)
            x = x + ctx @ W[p + "attn_output.weight"].T
            h = self.rms(x, W[p + "ffn_norm.weight"])
            g = h @ W[p + "ffn_gate.weight"].T
            x = x + ((g / (1 + np.exp(-g))) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
        return self.rms(x[-1], W["output_norm.weight"]) @ self.HEAD.T
