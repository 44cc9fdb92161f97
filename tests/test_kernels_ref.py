"""The float64 reference (zincbench.reference.kernels_ref) the families and the GPU tests check kernels with:
its routed product is the dense product of each item's expert, fp16 rounding happens before the
float64 product, and the relative error handles a zero reference."""

import math

import numpy as np
import pytest

from zincbench.reference import kernels_ref as ref


@pytest.mark.parametrize("x_per_slot", [False, True])
def test_experts_matvec_is_each_items_expert_times_its_activations(rng, x_per_slot):
    e, m, k, t, top_k = 5, 7, 33, 11, 3
    w = rng.standard_normal((e, m, k)).astype(np.float32)
    x = rng.standard_normal((t, top_k, k) if x_per_slot else (t, k)).astype(np.float32)
    ids = np.stack([rng.choice(e, size=top_k + 1, replace=False) for _ in range(t)])  # an extra column, unread
    y = ref.experts_matvec(w, x, ids, top_k)
    assert y.shape == (t, top_k, m) and y.dtype == np.float64
    for tok in range(t):
        for slot in range(top_k):
            xv = x[tok, slot] if x_per_slot else x[tok]
            expected = [
                math.fsum(a * b for a, b in zip(w[ids[tok, slot], row].tolist(), xv.tolist())) for row in range(m)
            ]
            assert y[tok, slot] == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_fp16_rounds_the_operands_before_a_float64_product(rng):
    # f32 operands, as the kernels take them: float64 -> f16 directly can round differently from f32 -> f16
    w, x = rng.standard_normal((6, 40), dtype=np.float32), rng.standard_normal((3, 40), dtype=np.float32)
    rounded = ref.dense_gemm(w.astype(np.float16), x.astype(np.float16))
    assert np.array_equal(ref.dense_gemm(w, x, fp16=True), rounded)
    assert not np.array_equal(ref.dense_gemm(w, x), rounded)


def test_rel_frobenius(rng):
    reference = rng.standard_normal((4, 9))
    assert ref.rel_frobenius(reference * 1.001, reference) == pytest.approx(1e-3)
    assert ref.rel_frobenius(np.zeros(3), np.zeros(3)) == 0.0
    assert ref.rel_frobenius(np.ones(3), np.zeros(3)) == math.inf
    got = reference.copy()
    got[1, 2] = np.nan
    assert ref.rel_frobenius(got, reference) == math.inf  # never NaN: max(NaN, x) depends on argument order
    got[1, 2] = np.inf
    assert ref.rel_frobenius(got, reference) == math.inf


def test_fp16_input_error_bound_explains_what_fp16_inputs_move_and_no_more():
    """The GPU tests' check of an fp16 path against exact math. The draw that failed a fixed 2e-3 relative bound (a
    correct Q6_K path, 5 outputs, K 256: fp16 inputs alone moved them by 0.72%, seed 7618227393891404928) is within
    the bound; a path with one sub-block's scale 2% off is not."""
    from zincbench.quant import get_format

    rng = np.random.default_rng(7618227393891404928)
    quant = get_format("q6_k")
    w = quant.dequantize(quant.random_blocks(rng, 15, 256)).reshape(3, 5, 256)
    ids = rng.integers(0, 2**32, size=(1, 1), dtype=np.uint32)
    ids[:, :1] = np.argsort(rng.random((1, 3)), axis=1)[:, :1]
    x = rng.standard_normal((1, 256)).astype(np.float32)

    def product(w_, x_, fp16=False):
        return ref.experts_matvec(w_, x_, ids, 1, fp16=fp16)

    fp16_path, exact = product(w, x, fp16=True), product(w, x)
    assert ref.rel_frobenius(fp16_path, exact) > 2e-3  # the old bound's failure
    bound = ref.fp16_input_error_bound(w, x, product)
    assert (np.abs(fp16_path - exact) <= bound).all()
    assert (bound < 0.05 * product(np.abs(w), np.abs(x))).all()  # it bounds the rounding, not the sums
    off = w.copy()
    off[:, :, 16:32] *= 1.02  # one 16-weight sub-block's scale
    assert (np.abs(product(off, x, fp16=True) - exact) > bound).any()


@pytest.mark.parametrize("shape", [(4, 64), (33, 512)])
def test_fp16_input_error_bound_is_zero_for_fp16_inputs_and_covers_random_ones(rng, shape):
    w = rng.standard_normal(shape).astype(np.float32) * 3
    x = rng.standard_normal((5, shape[1])).astype(np.float32)
    w16, x16 = (a.astype(np.float16).astype(np.float32) for a in (w, x))
    assert not ref.fp16_input_error_bound(w16, x16, ref.dense_gemm).any()
    bound = ref.fp16_input_error_bound(w, x, ref.dense_gemm)
    assert (np.abs(ref.dense_gemm(w, x, fp16=True) - ref.dense_gemm(w, x)) <= bound).all()
    sizes = ref.dense_gemm(np.abs(w), np.abs(x))
    assert np.allclose(ref.fp16_input_error_bound(w, x, ref.dense_gemm, sum_error=1e-4), bound + 1e-4 * sizes)
