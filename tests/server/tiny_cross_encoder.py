# Writes a BertForSequenceClassification directory with one label and random
# weights, sized small, with all-MiniLM-L6-v2's tokenizer files: a real
# cross-encoder layout (config.json, model.safetensors, tokenizer) made with
# numpy alone, for the /rerank tests.
import json
import os
import shutil
import struct

import numpy as np


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write(out, tokenizer_dir, hidden=32, layers=1, heads=2, ffn=48, seed=0):
    os.makedirs(out, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), out)
    vocab = sum(1 for _ in open(os.path.join(tokenizer_dir, "vocab.txt")))
    rng = np.random.default_rng(seed)
    t = {}

    def rand(name, *shape, scale=0.2):
        t[name] = rng.uniform(-scale, scale, shape).astype(np.float32)

    rand("bert.embeddings.word_embeddings.weight", vocab, hidden)
    rand("bert.embeddings.position_embeddings.weight", 512, hidden)
    rand("bert.embeddings.token_type_embeddings.weight", 2, hidden)
    t["bert.embeddings.LayerNorm.weight"] = np.ones(hidden, np.float32)
    t["bert.embeddings.LayerNorm.bias"] = np.zeros(hidden, np.float32)
    for i in range(layers):
        p = f"bert.encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            rand(p + m + ".weight", hidden, hidden)
            rand(p + m + ".bias", hidden, scale=0.05)
        rand(p + "intermediate.dense.weight", ffn, hidden)
        rand(p + "intermediate.dense.bias", ffn, scale=0.05)
        rand(p + "output.dense.weight", hidden, ffn)
        rand(p + "output.dense.bias", hidden, scale=0.05)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"] = np.ones(hidden, np.float32)
            t[p + ln + ".bias"] = np.zeros(hidden, np.float32)
    rand("bert.pooler.dense.weight", hidden, hidden, scale=0.4)
    rand("bert.pooler.dense.bias", hidden, scale=0.1)
    rand("classifier.weight", 1, hidden, scale=0.8)
    rand("classifier.bias", 1, scale=0.2)
    save_safetensors(os.path.join(out, "model.safetensors"), t)
    config = {"architectures": ["BertForSequenceClassification"], "model_type": "bert", "vocab_size": vocab,
              "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": ffn, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
              "layer_norm_eps": 1e-12, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    return out
