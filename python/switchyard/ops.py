"""Every op of the binding table on arrays.

    import numpy as np, switchyard
    a = np.random.rand(4, 64).astype(np.float32)
    w = np.random.rand(32, 64).astype(np.float32)
    y = switchyard.ops.matmul(a, w)                 # [4, 32] = a . w^T
    q = switchyard.quant.quantize(w, "q4_k")        # a QuantizedTensor
    y4 = switchyard.ops.matmul(a, q, kernel="avx2") # one sibling, by its variant

Operands are NumPy arrays or anything that speaks DLPack on the CPU (a PyTorch
tensor), read in place when row-major (float32, float16, bfloat16, int32), or
`QuantizedTensor`s. The call goes through the binding table exactly as dispatch
does: the first sibling that takes the operands' shapes, or the one `kernel`
names (its full name or its variant, the part after the last "__"), on
`backend`. A key with no kernel raises `switchyard.Error` (code "not_found")
carrying the table's diagnostic. Results are new NumPy arrays in the op's output
dtype; bfloat16 results come back as float32 (the widening is exact).

Shapes follow docs/ops.md. Two differences from NumPy are worth knowing:
`matmul(a, w)` multiplies by the transpose of `w` (weights are stored one output
row per row, as in GGUF files), and the binary ops broadcast here, in Python,
before the call (the kernels take equal shapes).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import numpy as np

from . import _switchyard
from .quant import QuantizedTensor

__all__ = [
    "call", "add", "sub", "mul", "div", "neg", "exp", "silu", "gelu", "gelu_erf", "gelu_quick",
    "relu", "sqrt", "rsqrt", "sigmoid", "tanh", "scale", "cast", "matmul", "linear",
    "ffn_swiglu", "rms_norm", "rms_norm_mul", "layer_norm", "softmax", "rope", "get_rows",
    "set_rows", "sum", "mean", "max", "copy", "transpose", "concat", "attention",
]


def _operand(x: Any) -> Any:
    if isinstance(x, QuantizedTensor):
        return (x.data, x.type, list(x.shape))
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        return x
    return np.asarray(x, dtype=np.float32)


def call(op: str, *inputs: Any, backend: str = "cpu", kernel: Optional[str] = None,
         out_dtype: Optional[str] = None, **params: Any) -> np.ndarray:
    """Runs `op` on `inputs` through the binding table. `params` are the op's
    parameters (scale, eps, axis, causal, rope_mode, rope_base, rope_dims,
    query_offset); `out_dtype` is cast's destination and get_rows' output."""
    return _switchyard.call(op, [_operand(x) for x in inputs], backend, kernel, out_dtype, params)


_NO_PARAMS: dict = {}


def _unary(op: str) -> Callable[..., np.ndarray]:
    def run(x: Any, *, backend: str = "cpu", kernel: Optional[str] = None) -> np.ndarray:
        return _switchyard.call(op, [_operand(x)], backend, kernel, None, _NO_PARAMS)
    run.__name__ = op
    run.__doc__ = f"Elementwise {op} (docs/ops.md)."
    return run


class BinaryOp(Protocol):
    """add, sub, mul and div: elementwise, the operands broadcast as NumPy
    broadcasts them."""

    def __call__(self, a: Any, b: Any, *, backend: str = "cpu",
                 kernel: Optional[str] = None) -> np.ndarray: ...


def _general_binary(op: str, a: Any, b: Any, backend: str, kernel: Optional[str]) -> np.ndarray:
    # Operands that are not two NumPy arrays of one shape: converted, broadcast.
    a, b = _operand(a), _operand(b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape != b.shape:
        a, b = np.broadcast_arrays(a, b)
    return call(op, a, b, backend=backend, kernel=kernel)


# Functions of the extension itself: two arrays of one shape go straight to the
# kernel (the fixed cost of a call), anything else through _general_binary.
add: BinaryOp = _switchyard.binary_op("add", _general_binary)
sub: BinaryOp = _switchyard.binary_op("sub", _general_binary)
mul: BinaryOp = _switchyard.binary_op("mul", _general_binary)
div: BinaryOp = _switchyard.binary_op("div", _general_binary)
(neg, exp, silu, gelu, gelu_erf, gelu_quick, relu, sqrt, rsqrt, sigmoid, tanh, copy,
 transpose) = (_unary(op) for op in ("neg", "exp", "silu", "gelu", "gelu_erf", "gelu_quick",
                                     "relu", "sqrt", "rsqrt", "sigmoid", "tanh", "copy",
                                     "transpose"))


def scale(x: Any, factor: float, *, backend: str = "cpu", kernel: Optional[str] = None):
    """x * factor."""
    return call("scale", x, backend=backend, kernel=kernel, scale=factor)


def cast(x: Any, dtype: str, *, backend: str = "cpu", kernel: Optional[str] = None):
    """x converted to `dtype` ("f32", "f16", "bf16"), rounded to nearest even."""
    return call("cast", x, backend=backend, kernel=kernel, out_dtype=dtype)


def matmul(a: Any, w: Any, *, backend: str = "cpu", kernel: Optional[str] = None):
    """a [..., k] times w [n, k] transposed: [..., n]. `w` may be a QuantizedTensor."""
    return call("matmul", a, w, backend=backend, kernel=kernel)


def linear(a: Any, w: Any, bias: Any, *, backend: str = "cpu", kernel: Optional[str] = None):
    """matmul(a, w) + bias."""
    return call("linear", a, w, bias, backend=backend, kernel=kernel)


def ffn_swiglu(x: Any, gate: Any, up: Any, down: Any, *, backend: str = "cpu",
               kernel: Optional[str] = None):
    """down(silu(gate(x)) * up(x)), each a matmul by the weight's transpose."""
    return call("ffn_swiglu", x, gate, up, down, backend=backend, kernel=kernel)


def rms_norm(x: Any, eps: float = 1e-5, *, backend: str = "cpu", kernel: Optional[str] = None):
    """x / sqrt(mean(x^2) + eps) over the last dimension."""
    return call("rms_norm", x, backend=backend, kernel=kernel, eps=eps)


def rms_norm_mul(x: Any, weight: Any, eps: float = 1e-5, *, backend: str = "cpu",
                 kernel: Optional[str] = None):
    """rms_norm(x, eps) * weight."""
    return call("rms_norm_mul", x, weight, backend=backend, kernel=kernel, eps=eps)


def layer_norm(x: Any, eps: float = 1e-5, *, backend: str = "cpu",
               kernel: Optional[str] = None):
    """(x - mean) / sqrt(var + eps) over the last dimension."""
    return call("layer_norm", x, backend=backend, kernel=kernel, eps=eps)


def softmax(x: Any, *inputs: Any, scale: float = 1.0, causal: bool = False,
            backend: str = "cpu", kernel: Optional[str] = None):
    """softmax(x * scale) over the last dimension; an optional mask is added first."""
    return call("softmax", x, *inputs, backend=backend, kernel=kernel, scale=scale, causal=causal)


def rope(x: Any, positions: Any, *factors: Any, mode: str = "normal", base: float = 10000.0,
         dims: int = 0, backend: str = "cpu", kernel: Optional[str] = None):
    """Rotary embedding of x [tokens, heads, head_dim] at int32 positions."""
    return call("rope", x, positions, *factors, backend=backend, kernel=kernel, rope_mode=mode,
                rope_base=base, rope_dims=dims)


def get_rows(table: Any, rows: Any, *, dtype: str = "f32", backend: str = "cpu",
             kernel: Optional[str] = None):
    """table[rows] (int32 rows), as `dtype`; `table` may be a QuantizedTensor."""
    return call("get_rows", table, rows, backend=backend, kernel=kernel, out_dtype=dtype)


def set_rows(dst: Any, src: Any, rows: Any, *, backend: str = "cpu",
             kernel: Optional[str] = None):
    """A copy of dst with dst[rows] = src."""
    return call("set_rows", dst, src, rows, backend=backend, kernel=kernel)


def _reduce(op: str) -> Callable[..., np.ndarray]:
    def run(x: Any, *, backend: str = "cpu", kernel: Optional[str] = None) -> np.ndarray:
        return call(op, x, backend=backend, kernel=kernel)
    run.__name__ = op
    run.__doc__ = f"The {op} over the last dimension."
    return run


sum, mean, max = (_reduce(op) for op in ("sum", "mean", "max"))  # noqa: A001


def concat(*inputs: Any, axis: int = -1, backend: str = "cpu", kernel: Optional[str] = None):
    """The inputs joined along `axis`."""
    return call("concat", *inputs, backend=backend, kernel=kernel, axis=axis)


def attention(q: Any, k: Any, v: Any, *mask: Any, scale: Optional[float] = None,
              causal: bool = False, query_offset: int = 0, backend: str = "cpu",
              kernel: Optional[str] = None):
    """softmax(q k^T * scale + mask) v with grouped-query heads; q [..., tokens,
    heads, head_dim], k and v [..., keys, kv_heads, head_dim]. `scale` defaults to
    1/sqrt(head_dim)."""
    if scale is None:
        scale = 1.0 / float(np.sqrt(np.shape(q)[-1]))
    return call("attention", q, k, v, *mask, backend=backend, kernel=kernel, scale=scale,
                causal=causal, query_offset=query_offset)
