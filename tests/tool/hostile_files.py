#!/usr/bin/env python3
"""Writes the malformed GGUF files of the hostile-input suite (hostile_test.sh).

Usage: hostile_files.py OUTDIR

Each file is named after what is wrong with it. They are written byte by byte
here, not through a GGUF library, so that every field can hold what no writer
would put there. Layout facts used (GGUF v3, little-endian): magic "GGUF", u32
version, u64 tensor count, u64 metadata count; a key is a u64 length and its
bytes, then a u32 value type; a tensor info is a name, a u32 dimension count,
u64 dimensions (innermost first), a u32 ggml type and a u64 data offset; the
data section starts at the next multiple of the alignment (32 by default).
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32_TYPE, Q4_0_TYPE = 0, 2


def s(text):
    raw = text if isinstance(text, bytes) else text.encode()
    return struct.pack("<Q", len(raw)) + raw


def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, value):
    return kv(key, U32, struct.pack("<I", value))


def kv_str(key, value):
    return kv(key, STRING, s(value))


def header(tensors, kvs, version=3, magic=b"GGUF"):
    return magic + struct.pack("<IQQ", version, tensors, kvs)


def tensor_info(name, dims, ggml_type=F32_TYPE, offset=0):
    out = s(name) + struct.pack("<I", len(dims))
    for d in dims:
        out += struct.pack("<Q", d)
    return out + struct.pack("<IQ", ggml_type, offset)


def pad(blob, align=32):
    return blob + b"\0" * (-len(blob) % align)


def gguf(kvs=(), infos=(), data=b"", version=3, tensor_count=None, kv_count=None):
    body = header(len(infos) if tensor_count is None else tensor_count,
                  len(kvs) if kv_count is None else kv_count, version)
    body += b"".join(kvs) + b"".join(infos)
    return pad(body) + data


def f32_data(n, value=0.5):
    return struct.pack("<%df" % n, *([value] * n))


ARCH = kv_str("general.architecture", "llama")
ONE_TENSOR = [tensor_info("w", [4, 2])]
ONE_DATA = f32_data(8)

FILES = {
    "empty": b"",
    "three_bytes": b"GGU",
    "bad_magic": header(0, 0, magic=b"GGML"),
    "version_0": header(0, 0, version=0),
    "version_99": header(0, 0, version=99),
    "header_cut": header(0, 0)[:20],
    "tensor_count_2e63": header(1 << 63, 0),
    "kv_count_2e60": header(0, 1 << 60),
    "key_length_2e62": header(0, 1) + struct.pack("<Q", 1 << 62) + b"\0" * 64,
    "key_past_end": header(0, 1) + struct.pack("<Q", 100) + b"abc" + b"\0" * 40,
    "value_type_99": gguf([kv("k", 99, b"\0" * 8)]),
    "string_past_end": gguf([kv("k", STRING, struct.pack("<Q", 1 << 40) + b"x")]),
    "array_count_2e60": gguf([kv("k", ARRAY, struct.pack("<IQ", U8, 1 << 60))]),
    "array_type_99": gguf([kv("k", ARRAY, struct.pack("<IQ", 99, 1) + b"\0" * 8)]),
    "array_nesting_deep": header(0, 1) + s("k") + struct.pack("<I", ARRAY)
    + struct.pack("<IQ", ARRAY, 1) * 200 + struct.pack("<IQ", U8, 0),
    "duplicate_key": gguf([kv_u32("a", 1), kv_u32("a", 2)]),
    "alignment_0": gguf([kv_u32("general.alignment", 0)], ONE_TENSOR, ONE_DATA),
    "alignment_3": gguf([kv_u32("general.alignment", 3)], ONE_TENSOR, ONE_DATA),
    "alignment_string": gguf([kv_str("general.alignment", "32")], ONE_TENSOR, ONE_DATA),
    "tensor_name_2e40": header(1, 0) + struct.pack("<Q", 1 << 40) + b"w" + b"\0" * 64,
    "tensor_0_dims": gguf(infos=[tensor_info("w", [])]),
    "tensor_5_dims": gguf(infos=[tensor_info("w", [1, 1, 1, 1, 1])], data=f32_data(1)),
    "tensor_dim_0": gguf(infos=[tensor_info("w", [4, 0])]),
    "tensor_dim_2e63": gguf(infos=[tensor_info("w", [1 << 63])]),
    "tensor_dims_overflow": gguf(infos=[tensor_info("w", [1 << 40, 1 << 40])]),
    "tensor_type_99": gguf(infos=[tensor_info("w", [4], 99)], data=f32_data(4)),
    "tensor_type_removed_q4_2": gguf(infos=[tensor_info("w", [32], 4)], data=b"\0" * 64),
    "tensor_row_not_blocks": gguf(infos=[tensor_info("w", [33], Q4_0_TYPE)], data=b"\0" * 64),
    "tensor_offset_misaligned": gguf(infos=[tensor_info("w", [4], F32_TYPE, 4)], data=f32_data(8)),
    "tensor_data_past_end": gguf(infos=[tensor_info("w", [1 << 20])], data=f32_data(4)),
    "tensors_overlap": gguf(infos=[tensor_info("a", [8]), tensor_info("b", [8], F32_TYPE, 0)],
                            data=f32_data(8)),
    "duplicate_tensor": gguf(infos=[tensor_info("w", [8]), tensor_info("w", [8], F32_TYPE, 32)],
                             data=f32_data(16)),
    "tensor_infos_cut": (gguf(infos=ONE_TENSOR, data=ONE_DATA))[:50],
    "control_bytes_in_name": gguf(infos=[tensor_info(b"w\n\x1b[31mred", [1 << 20])],
                                  data=f32_data(4)),
    "control_bytes_in_key": gguf([kv_u32("k\n\x1b]0;title\x07", 1), kv_u32("k\n\x1b]0;title\x07", 2)]),
    # Well-formed GGUF files that are not models Switchyard can run.
    "no_metadata": gguf(infos=ONE_TENSOR, data=ONE_DATA),
    "architecture_gpt9": gguf([kv_str("general.architecture", "gpt9")], ONE_TENSOR, ONE_DATA),
    "llama_without_keys": gguf([ARCH], ONE_TENSOR, ONE_DATA),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, blob in FILES.items():
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
