"""Switchyard from Python: the kernel binding table, GGUF block quantization and
the llama-family model runner.

    import switchyard
    print(switchyard.lookup("matmul", ["f32", "q4_k", "f32"], "cpu")["name"])
    model = switchyard.Model.load("model.gguf")
    for piece in model.generate("The kernel binding table", max_tokens=16):
        print(piece, end="", flush=True)

Names follow the `switchyard` tool: ops ("matmul"), dtypes ("q4_k"), backends
("cpu", "cuda"). Failures raise `switchyard.Error`, whose `code` is the status
code's name ("not_found", "invalid_argument", ...).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from . import _switchyard
from ._switchyard import (
    Error,
    alternatives,
    backend_supports,
    compiled_backends,
    coverage,
    lookup,
)

__all__ = [
    "Error",
    "Model",
    "alternatives",
    "backend_supports",
    "compiled_backends",
    "coverage",
    "dequantize",
    "lookup",
    "quantize",
]


def quantize(values, type: str) -> np.ndarray:
    """The bytes (uint8) of `values` stored as the GGUF block type `type`; the
    number of values must be a whole number of blocks."""
    return _switchyard.quantize(np.ascontiguousarray(values, dtype=np.float32).ravel(), type)


def dequantize(data, type: str, count: int) -> np.ndarray:
    """The float32 values of `count` elements stored as `type` in `data`."""
    return _switchyard.dequantize(np.ascontiguousarray(data, dtype=np.uint8).ravel(), type, count)


class Model:
    """A llama-family GGUF model loaded on one backend, with its tokenizer."""

    def __init__(self, native: _switchyard.Model):
        self._native = native

    @classmethod
    def load(cls, path: str, backend: str = "cpu", max_context: int = 0,
             cache_type: str = "f16", threads: int = 0) -> "Model":
        """Loads `path`, probing every kernel on `backend` and sealing the registry;
        `kernel_report` says what it found."""
        return cls(_switchyard.Model.load(str(path), backend, max_context, cache_type, threads))

    @property
    def config(self) -> dict:
        return self._native.config

    @property
    def kernel_report(self) -> str:
        return self._native.kernel_report

    def tokenize(self, text: str, add_special: bool = True,
                 parse_special: bool = False) -> list[int]:
        return self._native.tokenize(text, add_special, parse_special)

    def detokenize(self, ids: Sequence[int], render_special: bool = False) -> str:
        """The text of `ids`; bytes that are not UTF-8 become U+FFFD (see
        detokenize_bytes for the exact bytes)."""
        return self.detokenize_bytes(ids, render_special).decode("utf-8", errors="replace")

    def detokenize_bytes(self, ids: Sequence[int], render_special: bool = False) -> bytes:
        return self._native.detokenize(list(ids), render_special)

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """float32 [len(tokens), vocab]: the tokens run from an empty cache."""
        return self._native.eval(list(tokens), True)

    def generate(self, prompt: str | Sequence[int], max_tokens: int = 32,
                 temperature: float = 0.0, top_k: int = 40, top_p: float = 0.95,
                 min_p: float = 0.05, repeat_penalty: float = 1.0, seed: int = 0,
                 stop_at_eos: bool = True) -> Iterator[str]:
        """Yields the generated text piece by piece as it is produced (greedy at
        temperature 0). `prompt` is text (tokenized with BOS, control tokens
        written in it found) or token ids."""
        ids = (self.tokenize(prompt, parse_special=True) if isinstance(prompt, str)
               else list(prompt))
        run = _switchyard.Generation(self._native, ids, max_tokens, temperature, top_k, top_p,
                                     min_p, repeat_penalty, seed, stop_at_eos)
        # The native side holds back a character that a later token finishes, so
        # each piece is whole UTF-8 but for bytes that never form a character.
        while (piece := run.next()) is not None:
            yield piece.decode("utf-8", errors="replace")
