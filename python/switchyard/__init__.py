"""Switchyard from Python: the kernel binding table, the sealed lookup registry,
every kernel on arrays, planning, GGUF block quantization and the llama-family
model runner.

    import switchyard
    print(switchyard.lookup("matmul", ["f32", "q4_k", "f32"], "cpu")["name"])
    y = switchyard.ops.matmul(a, switchyard.quant.quantize(w, "q4_k"))
    with switchyard.mask("cpu:matmul:q4_k"):
        ...                                   # the table as a build without that kernel
    model = switchyard.Model.load("model.gguf")
    for piece in model.generate("The kernel binding table", max_tokens=16):
        print(piece, end="", flush=True)

Names follow the `switchyard` tool: ops ("matmul"), dtypes ("q4_k"), backends
("cpu", "cuda"). Failures raise `switchyard.Error`, whose `code` is the status
code's name ("not_found", "invalid_argument", ...); a missing kernel's Error
also carries the table's diagnostic as data in `payload` (op, dtypes, backend,
backends_for_op, available: what exists and where it was registered, rejected:
why each sibling at the key was refused), None for other errors.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from . import _switchyard
from ._switchyard import (
    Error,
    StrictPolicy,
    alternatives,
    backend_supports,
    compiled_backends,
    coverage,
    lookup,
    strict_policy,
)
from . import ops, quant

__all__ = [
    "Error",
    "Graph",
    "Model",
    "Plan",
    "StrictPolicy",
    "alternatives",
    "backend_supports",
    "compiled_backends",
    "coverage",
    "dequantize",
    "lookup",
    "mask",
    "ops",
    "plan",
    "probe",
    "quant",
    "quantize",
    "reset_registry",
    "seal",
    "strict",
    "strict_policy",
]


# --- the registry ------------------------------------------------------------
# The process-wide registry and kernel mask: what `Model.load` and `plan` record
# into and read. They are process state, so the context managers below change
# them for every thread until they exit.

def probe(op: str, dtypes: Sequence[str], backend: str, role: str = "",
          fallback: str = "") -> Optional[dict]:
    """Asks the table what dispatch would ask for (op, dtypes, backend) and records
    the answer, with `role`, as a build-phase hit or miss. The entry dispatch would
    run, or None on a miss (the seal report then lists it, naming `fallback`)."""
    return _switchyard.registry_probe(op, list(dtypes), backend, role, fallback)


def seal(check: bool = False) -> dict:
    """Seals the registry and returns its report: entries, misses, violations,
    surprises, masked bindings and the strict policy. With `check`, a violation
    the strict policy covers raises Error (code "failed_precondition") instead."""
    return json.loads(_switchyard.registry_seal(check))


def reset_registry() -> None:
    """Forgets every record and unseals the registry."""
    _switchyard.registry_reset()


@contextlib.contextmanager
def mask(*patterns: str) -> Iterator[None]:
    """Hides the bindings that `backend:op:dtype` patterns match (with `*`
    wildcards; several patterns or one comma-separated string), on top of the
    mask already in force, so lookups, probes, plans and model loads see a build
    without those kernels. The previous mask comes back on exit, also on an
    exception."""
    before = _switchyard.kernel_mask()
    spec = ",".join(p for p in (before, *patterns) if p)
    _switchyard.set_kernel_mask(spec)
    try:
        yield
    finally:
        _switchyard.set_kernel_mask(before)


@contextlib.contextmanager
def strict(policy: str = "all") -> Iterator[StrictPolicy]:
    """Makes slow-path misses fatal at seal: "all", or op families, ops and
    `role:<role>` items ("matmul,role:attn_v"), as SWITCHYARD_STRICT_KERNELS
    reads them. The previous policy comes back on exit, also on an exception."""
    parsed = _switchyard.parse_strict_policy(policy)
    before = _switchyard.strict_policy()
    _switchyard.set_strict_policy(parsed)
    try:
        yield parsed
    finally:
        _switchyard.set_strict_policy(before)


# --- planning ----------------------------------------------------------------

class Graph:
    """A graph to plan, built value by value; each method returns the new value's
    id. Shapes and dtypes are inferred as docs/ops.md says, and a mistake raises
    Error at the call that makes it.

        g = switchyard.Graph()
        x = g.input("x", "f32", [4, 64])
        w = g.input("w", "q4_k", [128, 64])
        g.output(g.op("matmul", [x, w], "proj", role="attn_q"))
        print(switchyard.plan(g).explain)
    """

    def __init__(self) -> None:
        self._native = _switchyard.Graph()

    def input(self, name: str, dtype: str, shape: Sequence[int]) -> int:
        return self._native.input(name, dtype, list(shape))

    def constant(self, name: str, values: Any) -> int:
        """A float32 constant, copied."""
        return self._native.constant(name, np.ascontiguousarray(values, dtype=np.float32))

    def op(self, op: str, inputs: Sequence[int], name: str, role: str = "",
           out_dtype: Optional[str] = None, **params: Any) -> int:
        return self._native.op(op, list(inputs), name, params, role, out_dtype)

    def reshape(self, value: int, shape: Sequence[int], name: str = "") -> int:
        return self._native.reshape(value, list(shape), name)

    def output(self, value: int) -> None:
        self._native.output(value)


@dataclass(frozen=True)
class Plan:
    """What the planner decided. `report` is `switchyard explain --json`'s object
    (buckets of nodes with the chosen kernel, its cost and precision, runners-up,
    rejections; casts, fusions, violations); `explain` its text. `planned` is
    False when some node has no route (`error` says which), with the report as
    far as planning got."""

    planned: bool
    report: dict
    explain: str
    error: str

    @property
    def nodes(self) -> list:
        """The first bucket's nodes."""
        return self.report["buckets"][0]["nodes"] if self.report["buckets"] else []


def plan(graph: Graph, prefer: Sequence[str] = ("cpu",), fallback: Sequence[str] = (),
         fusion: bool = True, casts: bool = True, record: bool = True,
         admit_precision_trades: bool = False) -> Plan:
    """Plans `graph` against the table: each node to a backend in `prefer` order
    (then `fallback`), siblings ranked by cost. With `record`, planning is the
    registry's build phase and seals it (a strict policy covering a violation
    raises Error). Kernels that compute in a narrower type to be faster (TF32)
    compete only with `admit_precision_trades`."""
    planned, report, text, error = _switchyard.plan(graph._native, list(prefer), list(fallback),
                                                    fusion, casts, record,
                                                    admit_precision_trades)
    return Plan(planned, json.loads(report), text, error)


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
             cache_type: str = "f16", threads: int = 0,
             admit_precision_trades: bool = False, devices: int = 0,
             pack_weights: bool = True) -> "Model":
        """Loads `path`, probing every kernel on `backend` and sealing the registry;
        `kernel_report` says what it found. With `admit_precision_trades` the planner
        may take kernels that compute in a narrower type to be faster (on cuda, TF32
        products of f32 weights). `devices` splits the model over that many ranks,
        tensor parallel (on the cpu, simulated ranks: threads of this process; on
        cuda, rank r on GPU r; docs/multi-gpu.md); `config["devices"]` says how many
        it runs on (0: not split). With `pack_weights` (the default) a CPU with
        AVX-512 VNNI reads the prompt's quantized weights packed once at load, which
        costs memory beside the file's (`kernel_report` says how much); False keeps
        every weight in the file's layout."""
        return cls(_switchyard.Model.load(str(path), backend, max_context, cache_type, threads,
                                          admit_precision_trades, devices, pack_weights))

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
