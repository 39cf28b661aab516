#!/usr/bin/env python3
"""Writes tests/data/gguf_cases.gguf: for each tensor type rlx dequantizes,
a small tensor of that type ("q.<TYPE>") and its f32 values as dequantized by
the `gguf` package's NumPy code ("ref.<TYPE>"), plus metadata of every value
type. rlx's GGUF reader must reproduce the references exactly.

Quantized blocks are random bytes with their f16 scale fields set to small
random values, so every bit pattern of the packed quants is exercised.

    pip install gguf numpy
    python3 tests/data/make_gguf_cases.py
"""
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "gguf_cases.gguf"

rng = np.random.default_rng(10)

# Byte offsets of each block's f16 scale fields, and the block size in bytes.
SCALE_FIELDS = {
    T.Q4_0: ([0], 18),
    T.Q4_1: ([0, 2], 20),
    T.Q8_0: ([0], 34),
    T.Q4_K: ([0, 2], 144),
    T.Q6_K: ([208], 210),
}
BLOCK_ELEMS = {T.Q4_0: 32, T.Q4_1: 32, T.Q8_0: 32, T.Q4_K: 256, T.Q6_K: 256}


def random_blocks(qtype, rows, cols):
    offsets, block_bytes = SCALE_FIELDS[qtype]
    nblocks = rows * cols // BLOCK_ELEMS[qtype]
    raw = rng.integers(0, 256, size=(nblocks, block_bytes), dtype=np.uint8)
    for off in offsets:
        scales = (rng.uniform(-0.05, 0.05, size=nblocks)).astype(np.float16)
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(rows, -1)


w = gguf.GGUFWriter(str(OUT), "test")
# Metadata of every value type; the C++ test asserts these exact values.
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -100)
w.add_uint16("t.u16", 60000)
w.add_int16("t.i16", -30000)
w.add_uint32("t.u32", 4000000000)
w.add_int32("t.i32", -2000000000)
w.add_float32("t.f32", 1.5)
w.add_bool("t.bool", True)
w.add_string("t.str", "héllo")
w.add_uint64("t.u64", 2**63 + 5)
w.add_int64("t.i64", -(2**62))
w.add_float64("t.f64", -0.125)
w.add_array("t.arr_i32", [1, -2, 3])
w.add_array("t.arr_str", ["a", "", "ccc"])

# Odd row counts; rows as long as one or a few blocks.
for qtype, rows, cols in [(T.Q4_0, 3, 96), (T.Q4_1, 5, 64), (T.Q8_0, 3, 160),
                          (T.Q4_K, 3, 512), (T.Q6_K, 3, 256)]:
    raw = random_blocks(qtype, rows, cols)
    w.add_tensor(f"q.{qtype.name}", raw, raw_dtype=qtype)
    w.add_tensor(f"ref.{qtype.name}", dequantize(raw, qtype).astype(np.float32))

# Float types from random values.
x = rng.normal(size=(7, 13)).astype(np.float32)
w.add_tensor("q.F32", x)
w.add_tensor("ref.F32", x)
h = x.astype(np.float16)
w.add_tensor("q.F16", h)
w.add_tensor("ref.F16", h.astype(np.float32))
b = quantize(x, T.BF16)
w.add_tensor("q.BF16", b, raw_dtype=T.BF16)
w.add_tensor("ref.BF16", dequantize(b, T.BF16).astype(np.float32))
# A 3-d tensor: shape order is checked too.
w.add_tensor("shape.3d", np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5))

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
