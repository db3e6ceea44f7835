#!/usr/bin/env python3
"""Cross-checks Switchyard's GGUF files against the `gguf` Python package.

  gguf_crosscheck.py read FILE    prints what the package reads from FILE, as JSON
  gguf_crosscheck.py write FILE   writes a known file with the package's writer

Used by tests/formats/gguf_crosscheck_test.cpp, which skips when the package is
not installed (`pip install gguf`).
"""
import json
import sys

import numpy as np
import gguf


def read(path):
    reader = gguf.GGUFReader(path)
    metadata = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue  # the reader's own pseudo-fields for the header
        types = [int(t) for t in field.types]
        nested = len(types) > 2 or (types[0] == int(gguf.GGUFValueType.ARRAY)
                                    and types[-1] == int(gguf.GGUFValueType.ARRAY))
        value = None if nested else field.contents()
        if isinstance(value, float) and value != value:
            value = "nan"
        metadata[name] = {"types": types, "value": value}
    tensors = []
    for t in reader.tensors:
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        tensors.append({
            "name": t.name,
            "ne": [int(d) for d in t.shape],
            "type": int(t.tensor_type),
            "n_bytes": int(t.n_bytes),
            "data_offset": int(t.data_offset),
            "byte_sum": int(raw.astype(np.uint64).sum()),
        })
    print(json.dumps({"alignment": int(reader.alignment), "data_offset": int(reader.data_offset),
                      "metadata": metadata, "tensors": tensors}))


def write(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("llama.block_count", 3)
    w.add_int32("test.i32", -7)
    w.add_float32("test.f32", 0.25)
    w.add_float64("test.f64", -1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "grüß")
    w.add_uint64("test.u64", 1 << 40)
    w.add_array("test.tokens", ["<s>", "a", "</s>"])
    w.add_array("test.ints", [1, 2, 3])
    w.add_tensor("matrix", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("cube", np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    w.add_tensor("half", np.array([1.0, -2.0, 0.5], dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    {"read": read, "write": write}[sys.argv[1]](sys.argv[2])
