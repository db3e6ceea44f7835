"""The switchyard package: every binding once, with its failure path."""

import threading

import numpy as np
import pytest

import switchyard


# --- the binding table -------------------------------------------------------

def test_the_table_lists_keys_with_their_siblings():
    assert "cpu" in switchyard.compiled_backends()
    keys = switchyard.coverage()
    assert keys, "the built-in table is empty"
    matmul = [k for k in keys if k["op"] == "matmul" and k["dtypes"] == ["f32", "f32", "f32"]
              and k["backend"] == "cpu"]
    assert len(matmul) == 1
    first = matmul[0]["alternatives"][0]
    assert first["name"] and first["source"]
    assert set(first["precision"]) >= {"bit_stable", "max_rel", "max_abs", "max_ulp"}
    assert ":" in first["site"]


def test_lookup_names_the_kernel_and_a_miss_raises_with_the_diagnostic():
    entry = switchyard.lookup("matmul", ["f32", "f32", "f32"], "cpu")
    assert entry["name"] == switchyard.alternatives("matmul", ["f32", "f32", "f32"], "cpu")[0]["name"]
    assert switchyard.backend_supports("matmul", ["f32", "q4_k", "f32"], "cpu")
    assert not switchyard.backend_supports("add", ["i32", "i32", "i32"], "cpu")
    assert switchyard.alternatives("add", ["i32", "i32", "i32"], "cpu") == []
    with pytest.raises(switchyard.Error) as miss:
        switchyard.lookup("add", ["i32", "i32", "i32"], "cpu")
    assert miss.value.code == "not_found"
    assert "add" in str(miss.value)
    # The diagnostic as data: the key, who has the op, what exists and where.
    payload = miss.value.payload
    assert (payload["op"], payload["dtypes"], payload["backend"]) == (
        "add", ["i32", "i32", "i32"], "cpu")
    assert "cpu" in payload["backends_for_op"]
    assert payload["available"] and all(a["op"] == "add" for a in payload["available"])
    f32 = [a for a in payload["available"] if a["dtypes"] == ["f32", "f32", "f32"]]
    assert f32 and f32[0]["kernel"] and ".cpp" in f32[0]["site"]
    assert isinstance(payload["rejected"], list)
    with pytest.raises(switchyard.Error) as bad:
        switchyard.lookup("no_such_op", ["f32"], "cpu")
    assert bad.value.code == "invalid_argument" and bad.value.payload is None
    with pytest.raises(switchyard.Error):
        switchyard.backend_supports("add", ["f99"], "cpu")


# --- quantization ------------------------------------------------------------

@pytest.mark.parametrize("kind, bound", [("q8_0", 0.01), ("q4_0", 0.15), ("q4_k", 0.15)])
def test_quantize_round_trips_within_the_format(kind, bound):
    x = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    data = switchyard.quantize(x, kind)
    assert data.dtype == np.uint8
    back = switchyard.dequantize(data, kind, x.size)
    assert back.dtype == np.float32 and back.shape == x.shape
    assert np.max(np.abs(back - x)) <= bound * np.max(np.abs(x))


@pytest.mark.parametrize("kind", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "mxfp4"])
def test_quantize_gives_the_gguf_packages_bytes(kind):
    # Every format the `gguf` package has a reference quantizer for (none for the
    # k-quants and the iq4 types).
    gguf = pytest.importorskip("gguf")
    x = np.random.default_rng(2).standard_normal((4, 256)).astype(np.float32)
    ours = switchyard.quantize(x, kind)
    theirs = gguf.quants.quantize(x, getattr(gguf.GGMLQuantizationType, kind.upper()))
    assert ours.tobytes() == theirs.tobytes()


def test_quantize_refuses_what_it_cannot_store():
    with pytest.raises(switchyard.Error):
        switchyard.quantize(np.ones(33, np.float32), "q8_0")  # not whole blocks
    with pytest.raises(switchyard.Error):
        switchyard.quantize(np.ones(32, np.float32), "no_such_type")
    with pytest.raises(switchyard.Error):
        switchyard.dequantize(np.zeros(10, np.uint8), "q8_0", 32)  # 34 bytes needed


# --- models ------------------------------------------------------------------

def test_weights_stay_in_the_files_layout_when_packing_is_off(model_path):
    # Packed or not, the prompt's logits agree within the integer kernels' claim.
    ids = list(range(1, 40))
    packed = switchyard.Model.load(model_path, threads=1)
    plain = switchyard.Model.load(model_path, threads=1, pack_weights=False)
    assert "packed" not in plain.kernel_report
    a, b = packed.logits(ids), plain.logits(ids)
    assert np.max(np.abs(a - b)) <= 0.05 * max(1.0, float(np.max(np.abs(b))))


def test_a_model_loads_tokenizes_and_scores(model_path):
    model = switchyard.Model.load(model_path, threads=1)
    assert model.config["vocab_size"] == 268
    assert "0 violations" in model.kernel_report
    ids = model.tokenize("then the answer")
    assert ids[0] == 266  # BOS
    assert model.detokenize(ids) == "then the answer"
    logits = model.logits(ids)
    assert logits.shape == (len(ids), 268) and logits.dtype == np.float32
    assert np.all(np.isfinite(logits))
    # The same tokens from an empty cache: the same bits.
    assert np.array_equal(model.logits(ids), logits)
    # A q8_0 cache keeps each head in blocks of 32 values: this model's heads of
    # 16 are refused by name.
    with pytest.raises(switchyard.Error) as narrow:
        switchyard.Model.load(model_path, threads=1, cache_type="q8_0")
    assert "blocks of 32" in str(narrow.value)


def test_generation_streams_text_and_greedy_follows_the_logits(model_path):
    model = switchyard.Model.load(model_path, threads=1)
    prompt = model.tokenize("the")
    pieces = list(model.generate(prompt, max_tokens=6, stop_at_eos=False))
    text = "".join(pieces)
    assert len(pieces) <= 6
    # Greedy: the first generated token is the argmax of the prompt's last logits.
    first = int(np.argmax(model.logits(prompt)[-1]))
    assert text.startswith(model.detokenize([first]))
    # The same seed, the same text.
    a = "".join(model.generate("the", max_tokens=8, temperature=0.9, seed=3, stop_at_eos=False))
    b = "".join(model.generate("the", max_tokens=8, temperature=0.9, seed=3, stop_at_eos=False))
    assert a == b


def test_model_errors_are_switchyard_errors(model_path, tmp_path):
    with pytest.raises(switchyard.Error) as missing:
        switchyard.Model.load(str(tmp_path / "none.gguf"))
    assert missing.value.code in ("unavailable", "not_found", "invalid_argument")
    with pytest.raises(switchyard.Error):
        switchyard.Model.load(model_path, backend="no_such_backend")
    with pytest.raises(switchyard.Error):
        switchyard.Model.load(model_path, cache_type="q4_0")
    model = switchyard.Model.load(model_path, threads=1)
    with pytest.raises(switchyard.Error) as outside:
        model.logits([100000])
    assert outside.value.code == "out_of_range"
    with pytest.raises(switchyard.Error):
        list(model.generate([], max_tokens=2))
    with pytest.raises(switchyard.Error):
        list(model.generate("x", max_tokens=2, temperature=-1))


def test_a_model_split_over_simulated_devices_gives_the_same_logits(model_path):
    ids = list(range(5, 17))
    whole = switchyard.Model.load(model_path, threads=1)
    split = switchyard.Model.load(model_path, threads=1, devices=2)
    assert whole.config["devices"] == 0
    assert split.config["devices"] == 2
    expected = whole.logits(ids)
    got = split.logits(ids)
    assert np.max(np.abs(got - expected)) <= 1e-4 * np.max(np.abs(expected))
    with pytest.raises(switchyard.Error) as uneven:
        switchyard.Model.load(model_path, threads=1, devices=3)
    assert uneven.value.code == "invalid_argument"
    assert "do not split evenly over 3 devices" in str(uneven.value)


def test_models_run_in_parallel_threads(model_path):
    ids = list(range(5, 40))
    expected = switchyard.Model.load(model_path, threads=1).logits(ids)
    results, errors = [None] * 4, []

    def work(i):
        try:
            model = switchyard.Model.load(model_path, threads=1)
            for _ in range(3):
                results[i] = model.logits(ids)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert np.array_equal(r, expected)


def test_one_model_shared_by_threads_takes_turns(model_path):
    model = switchyard.Model.load(model_path, threads=1)
    ids = list(range(5, 30))
    expected = model.logits(ids)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(model.logits(ids))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(np.array_equal(r, expected) for r in results)
    # A generation whose cache another call has since replaced says so.
    run = model.generate("the", max_tokens=4, stop_at_eos=False)
    next(run)
    model.logits(ids)
    with pytest.raises(switchyard.Error) as interrupted:
        list(run)
    assert interrupted.value.code == "failed_precondition"
