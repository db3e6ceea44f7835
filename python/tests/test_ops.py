"""switchyard.ops and switchyard.quant: kernels on arrays against NumPy in float64,
within each kernel's own precision claim, with their failure paths."""

import threading

import numpy as np
import pytest

import switchyard
from switchyard import ops, quant

try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # the property tests skip; everything else runs
    given = settings = st = None

F32 = np.float32
EPS = float(np.finfo(F32).eps)


def rng(seed=0):
    return np.random.default_rng(seed)


def claim(op, dtypes, kernel=None, backend="cpu"):
    siblings = switchyard.alternatives(op, dtypes, backend)
    if kernel is None:
        return siblings[0]["precision"]
    return next(s["precision"] for s in siblings if s["name"].endswith("_" + kernel))


def assert_within_ulps(got, want, ulps):
    """|got - want| within `ulps` units in the last place of float32 at `want`."""
    want = np.asarray(want, dtype=np.float64)
    ulp = np.spacing(np.abs(want).astype(F32)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - want) <= ulps * ulp + 1e-45)


# --- elementwise, against float64 --------------------------------------------

@pytest.mark.parametrize("op, reference", [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)])
def test_binary_ops_round_once(op, reference):
    a = rng(1).standard_normal((3, 17)).astype(F32)
    b = rng(2).standard_normal((3, 17)).astype(F32) + 3.0
    got = getattr(ops, op)(a, b)
    assert got.dtype == F32 and got.shape == a.shape
    max_ulp = claim(op, ["f32", "f32", "f32"])["max_ulp"]
    assert_within_ulps(got, reference(a.astype(np.float64), b.astype(np.float64)), max_ulp)


def test_binary_ops_broadcast_as_numpy_does():
    a = rng(3).standard_normal((4, 8)).astype(F32)
    row = rng(4).standard_normal(8).astype(F32)
    assert np.array_equal(ops.add(a, row), a + row)
    assert np.array_equal(ops.mul(a, F32(2.0)), a * F32(2.0))


def test_strided_inputs_are_read_as_their_values():
    a = rng(5).standard_normal((8, 6)).astype(F32)
    assert np.array_equal(ops.neg(a.T), -a.T)
    assert np.array_equal(ops.add(a[::2], a[1::2]), a[::2] + a[1::2])


def test_arrays_off_the_fast_path_give_the_same_answers_or_clear_errors():
    a = rng(6).standard_normal((3, 5)).astype(F32)
    b = rng(7).standard_normal((3, 5)).astype(F32)
    # An ndarray subclass, a list and a read-only array take the general path.
    assert np.array_equal(ops.add(a.view(np.matrix), b), a + b)
    assert np.array_equal(ops.add(a.tolist(), b), a + b)
    frozen = a.copy()
    frozen.flags.writeable = False
    assert np.array_equal(ops.mul(frozen, b), frozen * b)
    # Big-endian storage is no kernel's layout: an error, never a misread value.
    with pytest.raises(switchyard.Error) as swapped:
        ops.add(a.astype(">f4"), b.astype(">f4"))
    assert swapped.value.code == "invalid_argument"
    with pytest.raises(switchyard.Error) as not_binary:
        switchyard._switchyard.binary_op("neg", lambda *args: None)
    assert not_binary.value.code == "invalid_argument"


@pytest.mark.parametrize("op, reference", [
    ("exp", np.exp), ("tanh", np.tanh), ("sqrt", np.sqrt),
    ("sigmoid", lambda x: 1.0 / (1.0 + np.exp(-x))), ("silu", lambda x: x / (1.0 + np.exp(-x)))])
def test_unary_ops_meet_their_claim(op, reference):
    x = rng(6).uniform(0.1, 4.0, (5, 33)).astype(F32)
    got = getattr(ops, op)(x)
    p = claim(op, ["f32", "f32"])
    want = reference(x.astype(np.float64))
    if p["max_ulp"] is not None:
        assert_within_ulps(got, want, p["max_ulp"])
    else:
        assert np.all(np.abs(got - want) <= p["max_rel"] * np.abs(want) + (p["max_abs"] or 0))


def test_rms_norm_and_softmax_match_numpy():
    x = rng(7).standard_normal((3, 64)).astype(F32)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-5)
    assert np.allclose(ops.rms_norm(x), want, rtol=1e-5, atol=1e-6)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    assert np.allclose(ops.softmax(x), e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_casts_round_to_nearest_even():
    x = rng(8).standard_normal(64).astype(F32)
    half = ops.cast(x, "f16")
    assert half.dtype == np.float16 and np.array_equal(half, x.astype(np.float16))
    bf16 = ops.cast(x, "bf16")  # widened back to float32 exactly
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(F32)
    assert bf16.dtype == F32 and np.array_equal(bf16, rounded)
    assert np.array_equal(ops.cast(half, "f32"), half.astype(F32))


# --- matmul, dense and quantized -------------------------------------------------

def test_matmul_multiplies_by_the_weights_transpose_within_the_claim():
    a = rng(9).standard_normal((5, 96)).astype(F32)
    w = rng(10).standard_normal((24, 96)).astype(F32)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    scale = np.abs(a).astype(np.float64) @ np.abs(w).astype(np.float64).T
    for sibling in switchyard.alternatives("matmul", ["f32", "f32", "f32"], "cpu"):
        got = ops.matmul(a, w, kernel=sibling["name"])
        bound = sibling["precision"]["max_rel"] * scale
        assert np.all(np.abs(got - want) <= bound), sibling["name"]


@pytest.mark.parametrize("kind", ["q8_0", "q4_0", "q4_k", "q6_k", "iq4_xs"])
def test_quantized_matmul_matches_the_dequantized_product(kind):
    a = rng(11).standard_normal((3, 256)).astype(F32)
    q = quant.quantize(rng(12).standard_normal((16, 256)), kind)
    assert q.shape == (16, 256) and q.data.dtype == np.uint8 and q.data.shape[0] == 16
    w = q.dequantize().astype(np.float64)
    want = a.astype(np.float64) @ w.T
    scale = np.abs(a).astype(np.float64) @ np.abs(w).T
    for sibling in switchyard.alternatives("matmul", ["f32", kind, "f32"], "cpu"):
        got = ops.matmul(a, q, kernel=sibling["name"])
        assert np.all(np.abs(got - want) <= sibling["precision"]["max_rel"] * scale), sibling["name"]


def test_get_rows_reads_quantized_rows_exactly():
    q = quant.quantize(rng(13).standard_normal((6, 64)), "q8_0")
    rows = np.array([4, 0, 4], dtype=np.int32)
    assert np.array_equal(ops.get_rows(q, rows), q.dequantize()[rows])


def test_attention_matches_softmax_of_scores():
    t, h, d = 3, 2, 16
    q = rng(14).standard_normal((t, h, d)).astype(F32)
    k = rng(15).standard_normal((t, h, d)).astype(F32)
    v = rng(16).standard_normal((t, h, d)).astype(F32)
    got = ops.attention(q, k, v, causal=True)
    s = np.einsum("qhd,khd->hqk", q, k).astype(np.float64) / np.sqrt(d)
    s += np.triu(np.full((t, t), -np.inf), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert np.allclose(got, np.einsum("hqk,khd->qhd", p, v), rtol=1e-4, atol=1e-5)


def test_dlpack_producers_are_read_in_place():
    class OnlyDlpack:  # what a PyTorch tensor offers
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = rng(17).standard_normal((2, 8)).astype(F32)
    assert np.array_equal(ops.neg(OnlyDlpack(x)), -x)


# --- failures ----------------------------------------------------------------

def test_failures_raise_switchyard_errors():
    a = np.ones((2, 4), F32)
    with switchyard.mask("cpu:add:f32"):
        with pytest.raises(switchyard.Error) as miss:
            ops.add(a, a)
    assert miss.value.code == "not_found" and "add" in str(miss.value)
    assert np.array_equal(ops.add(a, a), a + a)
    with pytest.raises(switchyard.Error) as dtype:
        ops.add(a.astype(np.int32), a.astype(np.int32))  # add is for float storage
    assert dtype.value.code == "invalid_argument"
    with pytest.raises(switchyard.Error) as shape:
        ops.matmul(a, np.ones((3, 5), F32))
    assert shape.value.code == "invalid_argument"
    with pytest.raises(switchyard.Error) as named:
        ops.matmul(a, a, kernel="no_such_sibling")
    assert named.value.code == "not_found" and "matmul_f32" in str(named.value)
    with pytest.raises(switchyard.Error):
        ops.call("rms_norm", a, epsilon=1e-6)  # no such parameter
    with pytest.raises(switchyard.Error):
        ops.neg(np.ones(4, np.float64))  # float64 is no storage type
    with pytest.raises(switchyard.Error):
        ops.add(a, a, backend="no_such_backend")
    with pytest.raises(switchyard.Error):
        quant.quantize(np.ones((2, 33)), "q8_0")  # not whole blocks
    bad = quant.QuantizedTensor("q8_0", (2, 32), np.zeros((2, 10), np.uint8))
    with pytest.raises(switchyard.Error):
        ops.matmul(np.ones((1, 32), F32), bad)


# --- properties and threads ---------------------------------------------------

if st is not None:
    floats = st.floats(-1e3, 1e3, allow_nan=False, width=32)

    @settings(max_examples=40, deadline=None)
    @given(st.sampled_from(["add", "sub", "mul"]), st.integers(1, 5), st.integers(1, 70),
           st.sampled_from(["f32", "f16"]), st.data())
    def test_property_binary_ops_equal_numpy_rounded_once(op, rows, cols, dtype, data):
        np_type = np.float32 if dtype == "f32" else np.float16
        count = rows * cols
        a = np.array(data.draw(st.lists(floats, min_size=count, max_size=count)),
                     np_type).reshape(rows, cols)
        b = np.array(data.draw(st.lists(floats, min_size=count, max_size=count)),
                     np_type).reshape(rows, cols)
        with np.errstate(over="ignore"):  # f16 products overflow to inf, as the kernel's do
            want = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](
                a.astype(np.float64), b.astype(np.float64)).astype(np_type)
        got = getattr(ops, op)(a, b)
        assert got.dtype == np_type and np.array_equal(got, want)

    @settings(max_examples=25, deadline=None)
    @given(st.integers(1, 9), st.integers(1, 40), st.integers(1, 70), st.integers(0, 2**31))
    def test_property_matmul_within_its_claim(m, n, k, seed):
        g = np.random.default_rng(seed)
        a = g.standard_normal((m, k)).astype(F32)
        w = g.standard_normal((n, k)).astype(F32)
        got = ops.matmul(a, w)
        want = a.astype(np.float64) @ w.astype(np.float64).T
        scale = np.abs(a).astype(np.float64) @ np.abs(w).astype(np.float64).T
        max_rel = claim("matmul", ["f32", "f32", "f32"])["max_rel"]
        assert np.all(np.abs(got - want) <= max_rel * scale)
else:
    def test_property_tests_need_hypothesis():
        pytest.skip("hypothesis is not installed (pip install hypothesis)")


def test_kernels_run_from_four_threads_at_once():
    a = rng(18).standard_normal((64, 128)).astype(F32)
    w = rng(19).standard_normal((96, 128)).astype(F32)
    expected = ops.matmul(a, w)
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(ops.matmul(a, w))
                assert np.array_equal(ops.add(a, a), a + a)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 80 and all(np.array_equal(r, expected) for r in results)
