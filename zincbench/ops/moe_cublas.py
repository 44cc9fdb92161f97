"""The dequant-once + cuBLAS path for MoE routed experts (the plan's T2 step-1 competitor), one callable.

route on the GPU (kernels/moe_routing.cu) -> dequantize every expert's weights once, one launch over
[E][M][K] -> gather each expert's token rows to fp16, padded to a fixed capacity C per expert ->
ONE cublasGemmStridedBatchedEx over the E experts (fp16 inputs, f32 output, CUBLAS_COMPUTE_32F) ->
scatter back into y[T][top_k][M]. No host round-trip: per-expert counts stay on the GPU, which is
why buckets are padded to C. ``check()`` (after timing) reports a bucket larger than C.

``CublasGemm`` is the GEMM on its own; ``DenseDequantCublas`` is the engine's dense prefill
round-trip (dequant + f32_to_f16 + cuBLAS, the T1 gate's baseline) built from the same pieces.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from zincbench.errors import InputError
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import (
    ENGINE,
    ConversionKernels,
    DequantToF16,
    F32ToF16,
    check_array,
    dequant_traffic,
    row_weights,
)
from zincbench.ops.matvec import experts_matvec_traffic
from zincbench.ops.routing import GatherRows, RoutingWorkspace, ScatterRows, build_routing, routing_traffic
from zincbench.quant import get_format

# cuBLAS / CUDA library enum values (fixed by the C ABI).
CUDA_R_32F, CUDA_R_16F = 0, 2
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 = 68, 77
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_POINTER_MODE_HOST = 0


class CapacityExceeded(InputError):
    """An expert received more tokens than the padded capacity: its extra tokens were not computed."""


class CublasGemm:
    """y[b] = x[b] . w[b]^T for every batch entry b through cuBLAS, f32 out, f32 accumulation, on Tensor cores.

    fp16 operands (the engine's prefill GEMM): CUBLAS_COMPUTE_32F. f32 operands (the candidate's router):
    CUBLAS_COMPUTE_32F_FAST_TF32, the operands rounded to TF32 (10-bit mantissa) inside the GEMM.
    w: [B][M][K] (or [M][K]); x: [B][N][K] (or [N][K]), the same dtype; y: f32 [B][N][M] (or [N][M]).
    Row-major Y[N][M] is cuBLAS's column-major M x N, so the call is C = op_T(W) . op_N(X) with
    lda = ldb = K and ldc = M.
    """

    MATH = {
        np.dtype(np.float16): (CUDA_R_16F, CUBLAS_COMPUTE_32F),
        np.dtype(np.float32): (CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32),
    }
    # compute-sanitizer initcheck does not see what cuBLAS's sm90 GEMM kernels write: a kernel reading a
    # GEMM's output is reported as reading uninitialised memory (the probe's log:
    # results/h200/layer/probes/initcheck-cublas-output-20261201.log). The sanitizer driver sets this to
    # zero each output (a memset initcheck sees) before the GEMM overwrites it. The GPU tests check that
    # the GEMMs write every element: they poison outputs with NaN first.
    zero_output_first: ClassVar[bool] = False

    def __init__(self, w, x, y):
        import cupy

        if np.dtype(w.dtype) not in self.MATH:
            raise InputError(f"w: dtype {w.dtype}, expected float16 or float32")
        batched = w.ndim == 3
        lead = (None,) if batched else ()
        check_array(w, w.dtype, (*lead, None, None), "w")
        m, k = w.shape[-2:]
        batch = w.shape[0] if batched else 1
        check_array(x, w.dtype, (*((batch,) if batched else ()), None, k), "x")
        n = x.shape[-2]
        check_array(y, np.float32, (*((batch,) if batched else ()), n, m), "y")
        self.m, self.n, self.k, self.batch = m, n, k, batch
        self.operand_type, self.compute_type = self.MATH[np.dtype(w.dtype)]
        self.handle = cupy.cuda.device.get_cublas_handle()
        # Host scalars for the host pointer mode; kept alive for as long as launches may read them.
        self.alpha = np.ones(1, dtype=np.float32)
        self.beta = np.zeros(1, dtype=np.float32)
        self.buffers = (w, x, y)

    def __call__(self) -> None:
        from cupy.cuda import cublas

        w, x, y = self.buffers
        m, n, k = self.m, self.n, self.k
        if self.zero_output_first:
            y.fill(0)
        cublas.setPointerMode(self.handle, CUBLAS_POINTER_MODE_HOST)
        # gemmStridedBatchedEx binds the handle to the current CuPy stream before enqueueing.
        cublas.gemmStridedBatchedEx(
            self.handle,
            CUBLAS_OP_T,
            CUBLAS_OP_N,
            m,
            n,
            k,
            self.alpha.ctypes.data,
            w.data.ptr,
            self.operand_type,
            k,
            m * k,
            x.data.ptr,
            self.operand_type,
            k,
            n * k,
            self.beta.ctypes.data,
            y.data.ptr,
            CUDA_R_32F,
            m,
            n * m,
            self.batch,
            self.compute_type,
            CUBLAS_GEMM_DEFAULT,
        )

    def traffic(self) -> Traffic:
        size = self.buffers[0].dtype.itemsize
        moved = self.batch * (size * (self.m * self.k + self.n * self.k) + 4 * self.n * self.m)
        return Traffic(moved, moved)

    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


class DenseDequantCublas:
    """Y[T][M] = X[T][K] . W[M][K]^T the engine's way: dequant W to fp16, downcast X, cuBLAS fp16 GEMM.

    weights: uint8 [M][row bytes] (Q4_K or Q6_K); x: f32 [T][K]; y: f32 [T][M]. Three launches per call;
    the fp16 scratch buffers are allocated here, once. ``kernels``: the conversions' kernel set (the engine's, or
    ops.dequant.VECTORIZED: the same values at memory bandwidth).
    """

    def __init__(self, fmt: str, weights, x, y, kernels: ConversionKernels = ENGINE):
        import cupy

        check_array(weights, np.uint8, (None, None), "weights")
        m, k = weights.shape[0], row_weights(fmt, weights.shape[1])
        check_array(x, np.float32, (None, k), "x")
        self.fmt, self.m, self.k, self.t = fmt, m, k, x.shape[0]
        self.w16 = cupy.empty((m, k), dtype=cupy.float16)
        self.x16 = cupy.empty((self.t, k), dtype=cupy.float16)
        self.steps = (
            DequantToF16(fmt, weights, self.w16, kernels),
            F32ToF16(x, self.x16, kernels),
            CublasGemm(self.w16, self.x16, y),
        )

    def __call__(self) -> None:
        for step in self.steps:
            step()

    def traffic(self) -> Traffic:
        """minimum: quantized W, f32 X and Y once; actual: the three steps including both fp16 scratch buffers."""
        minimum = self.m * get_format(self.fmt).row_bytes(self.k) + 4 * self.t * self.k + 4 * self.t * self.m
        actual = self.steps[0].traffic() + self.steps[1].traffic() + self.steps[2].traffic()
        return Traffic(minimum, actual.bytes_model)

    def flops(self) -> int:
        return 2 * self.m * self.k * self.t


class MoeDequantCublas:
    """y[t][slot] = W[ids[t][slot]] . x[t] (or x[t][slot]) by dequant-once + batched cuBLAS, bound to buffers.

    weights: uint8 [E][M][row bytes] (Q4_K or Q6_K); x: f32 [T][K] or [T][top_k][K] (``x_per_slot``);
    expert_ids: uint32 [T][routing_stride]; y: f32 [T][top_k][M]. Five launches per call (route,
    dequant, gather, GEMM, scatter); workspaces are allocated here, once.

    Padding cost: the GEMM runs E*C token rows instead of P = T*top_k, i.e. E*C/P times the useful
    FLOPs and E*C*(2K + 4M) bytes of grouped activations/results instead of P*(2K + 4M). With
    uniform routing C must cover the largest bucket, about N_e + 3*sqrt(N_e) for N_e = P/E tokens per
    expert, so roughly 2x the FLOPs at N_e = 8 and 1.4x at N_e = 64. The path's traffic is dominated
    anyway by dequantizing every expert (E*M*K*2 bytes of fp16 written and read back, 3.5x the Q4_K
    bytes), which is the price of having no host round-trip and no per-expert launches. ``kernels``: the dequant's
    kernel set (ops.dequant.ENGINE or VECTORIZED).
    """

    def __init__(
        self,
        fmt: str,
        weights,
        x,
        expert_ids,
        y,
        *,
        top_k: int,
        capacity: int,
        x_per_slot: bool = False,
        routing_build: str = "single_block",
        kernels: ConversionKernels = ENGINE,
    ):
        import cupy

        check_array(weights, np.uint8, (None, None, None), "weights")
        check_array(expert_ids, np.uint32, (None, None), "expert_ids")
        if capacity < 1:
            raise InputError(f"capacity must be >= 1 token per expert, got {capacity}")
        n_experts, m, row_bytes = weights.shape
        k = row_weights(fmt, row_bytes)
        t = expert_ids.shape[0]
        self.fmt, self.n_experts, self.m, self.k, self.t, self.top_k = fmt, n_experts, m, k, t, top_k
        self.capacity, self.x_per_slot = capacity, x_per_slot
        self.routing = RoutingWorkspace(t, top_k, n_experts, tile_n=capacity, build=routing_build)
        self.w16 = cupy.empty((n_experts, m, k), dtype=cupy.float16)
        # Zeroed once so padding rows hold finite values; their GEMM outputs are never read.
        self.x16 = cupy.zeros((n_experts, capacity, k), dtype=cupy.float16)
        self.y_grouped = cupy.empty((n_experts, capacity, m), dtype=cupy.float32)
        self.expert_ids = expert_ids
        self.dequant = DequantToF16(fmt, weights, self.w16, kernels)
        self.gather = GatherRows(x, self.routing, self.x16, capacity=capacity, x_per_slot=x_per_slot)
        self.gemm = CublasGemm(self.w16, self.x16, self.y_grouped)
        self.scatter = ScatterRows(self.y_grouped, self.routing, y, capacity=capacity)

    def __call__(self) -> None:
        build_routing(self.expert_ids, self.routing)
        self.dequant()
        self.gather()
        self.gemm()
        self.scatter()

    def check(self) -> None:
        """Raise if the last call dropped work (a bucket over capacity, ids >= E). Synchronises."""
        bad, largest = self.routing.status()
        if bad:
            raise InputError(f"{bad} routing ids are >= the {self.n_experts} experts")
        if largest > self.capacity:
            raise CapacityExceeded(
                f"an expert received {largest} tokens, more than the capacity of {self.capacity}: raise the capacity"
            )

    def traffic(self, experts_hit: int) -> Traffic:
        """minimum: the MoE op's (hit experts' quantized weights once, x, y); actual: the five steps."""
        minimum = experts_matvec_traffic(
            self.fmt, self.t, self.top_k, self.m, self.k, experts_hit, self.x_per_slot
        ).bytes_min
        actual = (
            routing_traffic(self.t, self.top_k, self.n_experts, self.capacity)
            + dequant_traffic(self.fmt, self.n_experts * self.m, self.k)
            + self.gather.traffic()
            + self.gemm.traffic()
            + self.scatter.traffic()
        ).bytes_model
        return Traffic(minimum, actual)

    def flops(self) -> int:
        """Useful FLOPs (2*P*M*K); the GEMM executes ``self.gemm.flops()`` including padding rows."""
        return 2 * self.t * self.top_k * self.m * self.k
