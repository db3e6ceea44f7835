"""The registry, kernel masks and strict policy as context managers, and
planning from Python."""

import pytest

import switchyard

Q4K = ["f32", "q4_k", "f32"]


def quantized_projection():
    g = switchyard.Graph()
    x = g.input("x", "f32", [4, 256])
    w = g.input("w", "q4_k", [128, 256])
    g.output(g.op("matmul", [x, w], "proj", role="attn_q"))
    return g


def f32_projection():
    g = switchyard.Graph()
    x = g.input("x", "f32", [4, 64])
    w = g.input("w", "f32", [32, 64])
    g.output(g.op("matmul", [x, w], "proj"))
    return g


def test_a_mask_hides_kernels_and_comes_off_on_exit_even_on_an_exception():
    assert switchyard.backend_supports("matmul", Q4K, "cpu")
    with switchyard.mask("cpu:matmul:q4_k"):
        assert not switchyard.backend_supports("matmul", Q4K, "cpu")
        with switchyard.mask("cpu:add:*"):  # masks nest
            assert not switchyard.backend_supports("add", ["f32", "f32", "f32"], "cpu")
            assert not switchyard.backend_supports("matmul", Q4K, "cpu")
        assert switchyard.backend_supports("add", ["f32", "f32", "f32"], "cpu")
    assert switchyard.backend_supports("matmul", Q4K, "cpu")
    with pytest.raises(RuntimeError):
        with switchyard.mask("cpu:matmul:q4_k"):
            raise RuntimeError("inside")
    assert switchyard.backend_supports("matmul", Q4K, "cpu")
    with pytest.raises(switchyard.Error) as bad:
        with switchyard.mask("cpu:matmul"):
            pass
    assert bad.value.code == "invalid_argument"


def test_probes_are_recorded_and_the_seal_reports_misses():
    switchyard.reset_registry()
    try:
        assert switchyard.probe("matmul", Q4K, "cpu", role="ffn_down")["name"]
        with switchyard.mask("cpu:matmul:q4_k"):
            assert switchyard.probe("matmul", Q4K, "cpu", role="attn_q",
                                    fallback="dequantize + f32 matmul") is None
        report = switchyard.seal()
        assert len(report["entries"]) == 2
        [miss] = report["misses"]
        assert miss["role"] == "attn_q" and miss["dtype"] == "q4_k"
    finally:
        switchyard.reset_registry()


def test_strict_mode_refuses_a_masked_kernel_and_restores_itself(model_path):
    with switchyard.mask("cpu:matmul:f32"):
        unplanned = switchyard.plan(f32_projection())
        assert not unplanned.planned and "matmul" in unplanned.error
        assert unplanned.nodes[0]["resolved"] is False
        with pytest.raises(switchyard.Error) as unplannable:  # no f32 matmul at all
            switchyard.Model.load(model_path, threads=1)
        assert "no kernel for matmul(f32,f32,f32)@cpu" in str(unplannable.value)
        with switchyard.strict("matmul") as policy:
            assert policy.enabled and str(policy) == "family matmul"
            with pytest.raises(switchyard.Error) as refused:
                switchyard.Model.load(model_path, threads=1)
            assert refused.value.code == "failed_precondition"
            assert "NO KERNEL for cpu matmul f32 (attn_q)" in str(refused.value)
    assert not switchyard.strict_policy().enabled
    assert "0 violations" in switchyard.Model.load(model_path, threads=1).kernel_report
    with pytest.raises(switchyard.Error):
        with switchyard.strict("no_such_family"):
            pass


def test_a_plan_explains_its_choice():
    switchyard.reset_registry()
    try:
        result = switchyard.plan(quantized_projection())
    finally:
        switchyard.reset_registry()
    assert result.planned and result.error == ""
    [node] = result.nodes
    assert node["name"] == "proj" and node["role"] == "attn_q"
    assert node["chosen"]["kernel"].startswith("matmul_f32_q4_k_f32__cpu")
    assert node["chosen"]["estimated_ns"]["total"] > 0
    assert "proj" in result.explain


@pytest.mark.skipif("cuda" not in switchyard.compiled_backends(),
                    reason="the cuda backend is not compiled in")
def test_a_precision_trade_is_planned_only_when_admitted():
    # Planning needs no device. TF32 is cuda's f32 product in a narrower type.
    def chosen_and_rejected(admit):
        result = switchyard.plan(f32_projection(), prefer=["cuda"], record=False,
                                 admit_precision_trades=admit)
        assert result.planned, result.error
        [node] = [n for n in result.nodes if n["name"] == "proj"]
        return node["chosen"]["kernel"], {r["kernel"]: r["reason"] for r in node["rejected"]}

    kernel, rejected = chosen_and_rejected(False)
    assert "tf32" not in kernel
    assert rejected["matmul_f32__cuda_cublaslt_tf32"] == "precision_trade"
    kernel, rejected = chosen_and_rejected(True)
    assert "matmul_f32__cuda_cublaslt_tf32" not in rejected


def test_graph_mistakes_raise_at_the_call_that_makes_them():
    g = switchyard.Graph()
    x = g.input("x", "f32", [4, 64])
    w = g.input("w", "f32", [32, 48])
    with pytest.raises(switchyard.Error) as bad:
        g.op("matmul", [x, w], "proj")
    assert bad.value.code == "invalid_argument"
    with pytest.raises(switchyard.Error):
        g.op("no_such_op", [x], "y")
