"""GGUF block quantization of NumPy arrays.

    q = switchyard.quant.quantize(w, "q4_k")   # w: float32 [..., k], k a whole number of blocks
    q.data                                     # uint8 [rows, row bytes]: the bytes a GGUF file holds
    w2 = switchyard.quant.dequantize(q)        # float32, w's shape

The bytes are the GGUF format's (the `gguf` package's reference quantizer writes
the same bytes where it has one), so a QuantizedTensor can be written to a file,
read back from one, or passed to `switchyard.ops` as a weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple

import numpy as np

from . import _switchyard

__all__ = ["QuantizedTensor", "quantize", "dequantize"]


@dataclass(frozen=True)
class QuantizedTensor:
    """A tensor stored in a GGUF block type: `shape` is the logical shape (the last
    dimension a whole number of blocks), `data` its bytes as uint8 [rows, row bytes]."""

    type: str
    shape: Tuple[int, ...]
    data: np.ndarray

    def dequantize(self) -> np.ndarray:
        return dequantize(self)


def quantize(values: Any, type: str) -> QuantizedTensor:
    """`values` (any float array, last dimension a whole number of `type`'s blocks)
    stored as `type` ("q4_0", "q8_0", "q4_k", ...)."""
    x = np.ascontiguousarray(values, dtype=np.float32)
    if x.ndim == 0:
        raise _switchyard.Error("quantize: a scalar is not a row of blocks")
    data = _switchyard.quantize(x.ravel(), type)
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    return QuantizedTensor(type, tuple(int(d) for d in x.shape), data.reshape(rows, -1))


def dequantize(q: QuantizedTensor) -> np.ndarray:
    """The float32 values of `q`, in its shape."""
    count = int(np.prod(q.shape, dtype=np.int64))
    flat = _switchyard.dequantize(np.ascontiguousarray(q.data, dtype=np.uint8).ravel(), q.type,
                                  count)
    return flat.reshape(q.shape)
