"""Launchers of kernels/ssm_scan.cu: the gated delta-net SSM block (the T3 gate).

The engine-ABI kernels take their buffers, then one push struct by value. Every launch packs the whole
parameter buffer from buffers and push fields given by name, laid out by the struct and signature in
ssm_scan.cu itself (zincbench.gpu.runtime.engine_abi_launch); experiments/engine_zinc.yaml launches the
same entries through the same layout code.
Geometry as the engine launches them (zinc-kernels.md §1.7-1.9, §2.1 ssmLayerBatched):
ssm_delta_net grid (dt_rank, hv) block hv; ssm_delta_net_warp grid (dt_rank, ceil(hv/4)) block (32, 4)
with 2*T*4 bytes of dynamic shared memory; ssm_conv1d_batched grid ceil(C/64) block 64;
ssm_gated_norm_batched grid (dt_rank, T) block hv. Our candidate ssm_delta_net_chunked_tc (and its
one-pass tf32 twin ssm_delta_net_chunked_tc1): grid (dt_rank, hv/32), block 128, shared memory as the
compiled module states (CHUNKED_SMEM_BYTES).
"""

from __future__ import annotations

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.runtime import engine_abi_launch, load_module
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import check_array
from zincbench.reference.ssm_ref import SsmDims

SOURCE = "ssm_scan.cu"
SCANS = {
    "block": "ssm_delta_net",
    "warp": "ssm_delta_net_warp",
    "chunked": "ssm_delta_net_chunked_tc",
    "chunked_tf32": "ssm_delta_net_chunked_tc1",
}
CHUNKED_D_STATE = 128  # the candidate's compile-time key width
CHUNKED_ROWS = 32  # state rows per block of the candidate
CONV_BLOCK = 64
MAX_SHARED_DEFAULT = 48 * 1024
MAX_GRID_Y = 65535


def chunked_shared_bytes() -> int:
    """The candidate's dynamic shared memory, read from the compiled module (one source of truth: the
    kernel's shared-memory layout)."""
    import cupy

    value = np.zeros(1, np.uint32)
    address = load_module(SOURCE).module.get_global_var("CHUNKED_SMEM_BYTES")  # a device address
    cupy.cuda.runtime.memcpy(value.ctypes.data, int(address), value.nbytes, cupy.cuda.runtime.memcpyDeviceToHost)
    return int(value[0])


def shared_limit() -> int:
    """The most dynamic shared memory a block of this device may opt in to."""
    import cupy

    return int(cupy.cuda.Device().attributes.get("MaxSharedMemoryPerBlockOptin", MAX_SHARED_DEFAULT))


def scan_unsupported(kind: str, dims: SsmDims) -> str | None:
    """Why a scan kernel cannot run these dimensions on this device (None: it can)."""
    if dims.d_state > dims.head_v_dim and kind == "block":
        return (
            f"the block scan keeps one k index per thread: needs d_state <= hv, got {dims.d_state} > {dims.head_v_dim}"
        )
    if kind == "block" and dims.head_v_dim % 32:
        return f"the block scan needs hv a multiple of 32, got {dims.head_v_dim}"
    if kind == "warp" and dims.d_state > 128:
        return f"the warp scan holds 4 k indices per lane: needs d_state <= 128, got {dims.d_state}"
    if kind.startswith("chunked"):
        if dims.d_state != CHUNKED_D_STATE or dims.head_v_dim % CHUNKED_ROWS:
            return (
                f"the chunked kernel is built for d_state = {CHUNKED_D_STATE} and hv a multiple of "
                f"{CHUNKED_ROWS}, got d_state = {dims.d_state}, hv = {dims.head_v_dim}"
            )
        if chunked_shared_bytes() > shared_limit():
            return f"needs {chunked_shared_bytes()} bytes of shared memory per block, this GPU allows {shared_limit()}"
    return None


def scan_traffic(dims: SsmDims, t: int) -> Traffic:
    """Minimum: conv_out, alpha and beta read once, out written once, the state read and written once.
    FLOPs of the recurrence: per token and head, decay + S.k + rank-1 update + S.q over hv x d_state."""
    moved = 4 * (
        t * dims.conv_channels
        + 2 * t * dims.dt_rank
        + t * dims.d_inner
        + 2 * dims.dt_rank * dims.head_v_dim * dims.d_state
    )
    return Traffic(moved, moved, 7 * t * dims.dt_rank * dims.head_v_dim * dims.d_state)


def conv1d_traffic(t: int, channels: int, d_conv: int) -> Traffic:
    """x read and out written once, the weights once, the state once each way; 2 FLOPs per tap."""
    moved = 4 * (2 * t * channels + channels * d_conv + 2 * (d_conv - 1) * channels)
    return Traffic(moved, moved, 2 * t * channels * d_conv)


def gated_norm_traffic(dims: SsmDims, t: int) -> Traffic:
    """o and z read, out written once, the weight once."""
    moved = 4 * (3 * t * dims.d_inner + dims.d_inner)
    return Traffic(moved, moved, 8 * t * dims.d_inner)


class DeltaNetScan:
    """One scan over T tokens: out [T][d_inner] and the state [dt_rank][hv][d_state] updated in place.

    conv_out f32 [T][conv_channels]; alpha, beta f32 [T][dt_rank] (pre-activation); dt_bias, ssm_a f32
    [dt_rank]. ``kind``: block | warp (the engine's) | chunked (the candidate) | chunked_tf32 (the same
    with one plain tf32 MMA per product).
    """

    def __init__(self, kind: str, dims: SsmDims, conv_out, dt_bias, alpha, beta, ssm_a, state, out):
        if kind not in SCANS:
            raise InputError(f"unknown scan kernel {kind!r} (known: {', '.join(SCANS)})")
        why = scan_unsupported(kind, dims)
        if why:
            raise InputError(why)
        t = conv_out.shape[0]
        check_array(conv_out, np.float32, (t, dims.conv_channels), "conv_out")
        for name, arr in (("alpha", alpha), ("beta", beta)):
            check_array(arr, np.float32, (t, dims.dt_rank), name)
        for name, arr in (("dt_bias", dt_bias), ("ssm_a", ssm_a)):
            check_array(arr, np.float32, (dims.dt_rank,), name)
        check_array(state, np.float32, (dims.dt_rank, dims.head_v_dim, dims.d_state), "state")
        check_array(out, np.float32, (t, dims.d_inner), "out")
        self.dims, self.t = dims, t
        d = dims
        push = {
            "dt_rank": d.dt_rank,
            "head_v_dim": d.head_v_dim,
            "d_state": d.d_state,
            "n_group": d.n_group,
            "ssm_a_is_f16": 0,
            "dt_bias_is_f16": 0,
            "has_dt_bias": 1,
            "has_ssm_a": 1,
            "n_tok": t,
            "conv_stride_tok": d.conv_channels,
            "ab_stride_tok": d.dt_rank,
            "y_stride_tok": d.d_inner,
        }
        if kind == "block":  # DeltaNetPush: the warp push plus d_inner and preprocessed
            push.update(d_inner=d.d_inner, preprocessed=0)
            grid, block, shared = (d.dt_rank, d.head_v_dim), (d.head_v_dim,), 0
        elif kind == "warp":
            grid, block, shared = (d.dt_rank, -(-d.head_v_dim // 4)), (32, 4), 2 * t * 4
        else:
            grid, block, shared = (d.dt_rank, d.head_v_dim // CHUNKED_ROWS), (128,), chunked_shared_bytes()
        if shared > shared_limit():
            raise InputError(
                f"{SCANS[kind]} at T={t} needs {shared} bytes of shared memory, this GPU allows {shared_limit()}"
            )
        buffers = {
            "conv_out": conv_out,
            "dt_bias": dt_bias,
            "alpha": alpha,
            "beta": beta,
            "ssm_a": ssm_a,
            "state": state,
            "out": out,
        }
        self.push = push
        self.launch = engine_abi_launch(SOURCE, SCANS[kind], grid, block, shared, buffers, push)

    def __call__(self) -> None:
        self.launch()

    def traffic(self) -> Traffic:
        return scan_traffic(self.dims, self.t)


class Conv1dBatched:
    """out [T][C] = silu(causal depthwise conv of x [T][C]) with weight f32 [C][d_conv] and the circular
    state f32 [d_conv-1][C] (oldest slot ``state_offset``), updated in place."""

    def __init__(self, x, weight, state, out, state_offset: int = 0):
        t, c = x.shape
        check_array(x, np.float32, (t, c), "x")
        d_conv = weight.shape[1] if weight.ndim == 2 else 0
        if d_conv < 2:
            raise InputError(f"conv weight must be [C][d_conv] with d_conv >= 2, got shape {weight.shape}")
        check_array(weight, np.float32, (c, d_conv), "weight")
        check_array(state, np.float32, (d_conv - 1, c), "state")
        check_array(out, np.float32, (t, c), "out")
        self.t, self.c, self.d_conv = t, c, d_conv
        self.push = {
            "conv_channels": c,
            "d_conv": d_conv,
            "kernel_is_f16": 0,
            "n_tok": t,
            "state_offset": state_offset % (d_conv - 1),
        }
        self.launch = engine_abi_launch(
            SOURCE,
            "ssm_conv1d_batched",
            (-(-c // CONV_BLOCK),),
            (CONV_BLOCK,),
            0,
            {"x": x, "kernel": weight, "state": state, "out": out},
            self.push,
        )

    def __call__(self) -> None:
        self.launch()

    def traffic(self) -> Traffic:
        return conv1d_traffic(self.t, self.c, self.d_conv)


class GatedNorm:
    """out [T][d_inner] = o * rsqrt(mean_head(o^2) + 1e-6) * w[idx] * silu(z); o, z f32 [T][d_inner];
    weight f32 [d_inner] (``norm_per_head``) or [d_state]."""

    def __init__(self, dims: SsmDims, o, z, weight, out, *, norm_per_head: bool):
        t = o.shape[0]
        for name, arr in (("o", o), ("z", z), ("out", out)):
            check_array(arr, np.float32, (t, dims.d_inner), name)
        check_array(weight, np.float32, (dims.d_inner if norm_per_head else dims.d_state,), "weight")
        if dims.head_v_dim % 32:
            raise InputError(
                f"the gated norm's block is hv threads: hv must be a multiple of 32, got {dims.head_v_dim}"
            )
        if t > MAX_GRID_Y:
            raise InputError(f"the gated norm's grid puts tokens on grid.y: T must be <= {MAX_GRID_Y}, got {t}")
        self.dims, self.t = dims, t
        self.push = {
            "d_inner": dims.d_inner,
            "dt_rank": dims.dt_rank,
            "head_v_dim": dims.head_v_dim,
            "d_state": dims.d_state,
            "norm_per_head": int(norm_per_head),
            "n_tok": t,
        }
        self.launch = engine_abi_launch(
            SOURCE,
            "ssm_gated_norm_batched",
            (dims.dt_rank, t),
            (dims.head_v_dim,),
            0,
            {"o": o, "z": z, "weight": weight, "out": out},
            self.push,
        )

    def __call__(self) -> None:
        self.launch()

    def traffic(self) -> Traffic:
        return gated_norm_traffic(self.dims, self.t)
