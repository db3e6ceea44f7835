#!/usr/bin/env python3
"""Write a small llama-family GGUF file laid out as the common converters lay out
real models, with random weights, through the `gguf` package's writer.

Usage: converter_layout.py KIND OUT.gguf

KIND is one of
  llama3   architecture "llama" as Llama 3.1 files have it: rope base 500000,
           rope_freqs.weight (the long-context frequency divisors), tied
           embeddings (no output.weight), an explicit attention.key_length that
           makes the heads wider than embedding / heads, f16 matrices
           (general.file_type 1), llama.vocab_size
  qwen2    architecture "qwen2": qwen2.* keys, q/k/v biases, rope base 1e6,
           an output.weight of its own, q8_0 matrices (general.file_type 7)
  linear   architecture "llama" with rope.scaling.type "linear" and a factor,
           rotating only part of each head (rope.dimension_count), f32

tests/models/llama_test.cpp loads each and compares the logits with the float64
reference forward pass (llama_reference.h).
"""

import math
import sys

import numpy as np

import gguf

VOCAB = 300
DIM = 64
BLOCKS = 2
HEADS = 4
KV_HEADS = 2
FF = 96


def llama3_rope_factors(head_dim, base, factor=8.0, low=1.0, high=4.0, original=8192):
    """Frequency divisors as Llama 3.1's rope scaling defines them: slow
    frequencies (long wavelengths) divided by `factor`, fast ones kept, and a
    smooth ramp between."""
    out = []
    low_wavelen = original / low
    high_wavelen = original / high
    for i in range(0, head_dim, 2):
        freq = 1.0 / (base ** (i / head_dim))
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("llama3", "qwen2", "linear"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, path = argv[1], argv[2]
    rng = np.random.default_rng({"llama3": 3, "qwen2": 2, "linear": 1}[kind])
    arch = "qwen2" if kind == "qwen2" else "llama"
    head_dim = 32 if kind == "llama3" else DIM // HEADS
    q_dim = head_dim * HEADS
    kv_dim = head_dim * KV_HEADS

    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"switchyard converter-layout test ({kind})")
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_block_count(BLOCKS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-6 if kind == "qwen2" else 1e-5)
    if kind == "llama3":
        w.add_rope_freq_base(500000.0)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_rope_dimension_count(head_dim)
        w.add_vocab_size(VOCAB)
        w.add_file_type(1)
    elif kind == "qwen2":
        w.add_rope_freq_base(1000000.0)
        w.add_file_type(7)
    else:
        w.add_rope_dimension_count(head_dim // 2)
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(4.0)
        w.add_file_type(0)

    def matrix(rows, cols):
        return (rng.uniform(-1, 1, size=(rows, cols)) * math.sqrt(3.0 / cols)).astype(np.float32)

    def store(name, values):
        if kind == "llama3":
            w.add_tensor(name, values.astype(np.float16))
        elif kind == "qwen2":
            packed = gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, packed, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, values)

    def norm(n):
        return (1.0 + rng.uniform(-0.125, 0.125, size=n)).astype(np.float32)

    # Tensor order as the converters write it: embeddings, rope factors, blocks,
    # the final norm and the head.
    store("token_embd.weight", matrix(VOCAB, DIM))
    if kind == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(head_dim, 500000.0))
    for b in range(BLOCKS):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", norm(DIM))
        store(p + "attn_q.weight", matrix(q_dim, DIM))
        store(p + "attn_k.weight", matrix(kv_dim, DIM))
        store(p + "attn_v.weight", matrix(kv_dim, DIM))
        if kind == "qwen2":
            for role, n in (("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim)):
                w.add_tensor(p + role + ".bias", rng.uniform(-0.5, 0.5, size=n).astype(np.float32))
        store(p + "attn_output.weight", matrix(DIM, q_dim))
        w.add_tensor(p + "ffn_norm.weight", norm(DIM))
        store(p + "ffn_gate.weight", matrix(FF, DIM))
        store(p + "ffn_up.weight", matrix(FF, DIM))
        store(p + "ffn_down.weight", matrix(DIM, FF))
    w.add_tensor("output_norm.weight", norm(DIM))
    if kind != "llama3":
        store("output.weight", matrix(VOCAB, DIM))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
