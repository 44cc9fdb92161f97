"""Float64 NumPy references for the gated delta-net SSM block (kernels/ssm_scan.cu, the T3 family).

Semantics follow the engine's block scan ``ssm_delta_net`` (zinc-kernels.md §1.7), the semantic
reference: per value head h (key/query group h mod n_group), per token t

    q, k  <- L2-normalised over d_state (x * rsqrt(max(sum x^2, 1e-12))), q also * 1/sqrt(d_state)
    g     =  exp(softplus(alpha + dt_bias) * ssm_a)   (exp(-softplus(.)) without ssm_a);  beta = sigmoid(beta)
    S     <- g * S;   d = beta * (v - S k);   S <- S + d k^T;   o = S q

with the state S stored [h][v][k] (the k index contiguous). ``delta_net_chunked`` is the same
recurrence in the WY / UT-transform chunk form the CUDA candidate implements; it must agree with
``delta_net_sequential`` to rounding, which tests/test_t3.py checks on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

L2_EPS = 1e-12
NORM_EPS = 1e-6  # ssm_gated_norm_batched's hard-coded epsilon


@dataclass(frozen=True)
class SsmDims:
    dt_rank: int  # value heads
    head_v_dim: int  # hv: value (and state) width per head
    d_state: int  # key/query width per group
    n_group: int  # key/query groups
    d_conv: int = 4

    @property
    def d_inner(self) -> int:
        return self.dt_rank * self.head_v_dim

    @property
    def qk_dim(self) -> int:
        return self.n_group * self.d_state

    @property
    def conv_channels(self) -> int:
        return 2 * self.qk_dim + self.d_inner

    def group_of(self, head: int) -> int:
        return head if self.n_group == self.dt_rank else head % self.n_group


def softplus(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.exp(x))


def gate_log(alpha: np.ndarray, dt_bias: np.ndarray | None, ssm_a: np.ndarray | None) -> np.ndarray:
    """log g, [T][dt_rank]: softplus(alpha + dt_bias) * ssm_a, or -softplus(.) without ssm_a."""
    a = np.asarray(alpha, np.float64) + (0.0 if dt_bias is None else np.asarray(dt_bias, np.float64))
    sp = softplus(a)
    return -sp if ssm_a is None else sp * np.asarray(ssm_a, np.float64)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def l2_normalize(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), L2_EPS))


def split_qkv(conv_out: np.ndarray, dims: SsmDims) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """conv_out [T][conv_channels] -> q, k [T][dt_rank][d_state] (each head's group, normalised and
    q scaled by 1/sqrt(d_state)) and v [T][dt_rank][hv], in float64."""
    x = np.asarray(conv_out, np.float64)
    t = x.shape[0]
    q = x[:, : dims.qk_dim].reshape(t, dims.n_group, dims.d_state)
    k = x[:, dims.qk_dim : 2 * dims.qk_dim].reshape(t, dims.n_group, dims.d_state)
    v = x[:, 2 * dims.qk_dim : 2 * dims.qk_dim + dims.d_inner].reshape(t, dims.dt_rank, dims.head_v_dim)
    groups = [dims.group_of(h) for h in range(dims.dt_rank)]
    q = l2_normalize(q)[:, groups] / np.sqrt(dims.d_state)
    k = l2_normalize(k)[:, groups]
    return q, k, v


def delta_net_sequential(q, k, v, log_g, beta, state) -> tuple[np.ndarray, np.ndarray]:
    """The recurrence token by token. q, k [T][H][dk]; v [T][H][dv]; log_g, beta [T][H] (beta already
    through the sigmoid); state [H][dv][dk]. Returns out [T][H][dv] and the final state."""
    s = np.array(state, np.float64)
    g = np.exp(log_g)
    out = np.empty(v.shape, np.float64)
    for t in range(v.shape[0]):
        s *= g[t][:, None, None]
        sk = np.einsum("hvk,hk->hv", s, k[t])
        d = beta[t][:, None] * (v[t] - sk)
        s += d[:, :, None] * k[t][:, None, :]
        out[t] = np.einsum("hvk,hk->hv", s, q[t])
    return out, s


def delta_net_chunked(q, k, v, log_g, beta, state, chunk: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """The same recurrence, a chunk at a time (what kernels/ssm_scan.cu's candidate computes).

    Inside a chunk with cumulative log-decay c_r = sum_{i<=r} log g_i and start state S0, the state
    after token r is S_r = e^{c_r} S0 + sum_{i<=r} e^{c_r - c_i} d_i k_i^T, where the corrections d_i
    solve the unit-lower-triangular system (I + A) D = B (V - e^{c} K S0^T), A_ij = beta_i e^{c_i - c_j}
    k_i.k_j for j < i (forward substitution). Then O = e^{c} Q S0^T + (e^{c_r - c_i} q_r.k_i)_{i<=r} D and
    S_end = e^{c_last} S0 + sum_i e^{c_last - c_i} d_i k_i^T: matrix products a GPU runs on Tensor cores.
    """
    s = np.array(state, np.float64)
    n_tok = v.shape[0]
    out = np.empty(v.shape, np.float64)
    for c0 in range(0, n_tok, chunk):
        sl = slice(c0, min(c0 + chunk, n_tok))
        qc, kc, vc = (np.moveaxis(x[sl], 0, 1) for x in (q, k, v))  # [H][L][*]
        bc = beta[sl].T  # [H][L]
        cum = np.cumsum(log_g[sl].T, axis=1)  # [H][L]
        n = cum.shape[1]
        lower = np.tril(np.ones((n, n), bool))
        decay = np.where(lower, np.exp(np.where(lower, cum[:, :, None] - cum[:, None, :], 0.0)), 0.0)  # [H][r][i]
        gram = np.einsum("hik,hjk->hij", kc, kc)
        a = np.where(np.tril(lower, -1), bc[:, :, None] * decay * gram, 0.0)
        ks0 = np.einsum("hlk,hvk->hlv", kc, s)  # (K S0^T)
        rhs = bc[:, :, None] * (vc - np.exp(cum)[:, :, None] * ks0)
        d = np.empty_like(rhs)
        for i in range(n):  # forward substitution, row by row, as the kernel does
            d[:, i] = rhs[:, i] - np.einsum("hj,hjv->hv", a[:, i, :i], d[:, :i])
        qs0 = np.einsum("hlk,hvk->hlv", qc, s)
        attn = decay * np.einsum("hrk,hik->hri", qc, kc)
        out[sl] = np.moveaxis(np.exp(cum)[:, :, None] * qs0 + np.einsum("hri,hiv->hrv", attn, d), 0, 1)
        tail = np.exp(cum[:, -1:] - cum)  # [H][L]
        s = np.exp(cum[:, -1])[:, None, None] * s + np.einsum("hi,hiv,hik->hvk", tail, d, kc)
    return out, s


def delta_net_block(conv_out, alpha, beta, dt_bias, ssm_a, state, dims: SsmDims, *, heads=None, chunked=False):
    """The scan as the engine's block kernel defines it, from raw buffers: conv_out [T][conv_channels],
    alpha/beta [T][dt_rank] (pre-activation), dt_bias/ssm_a [dt_rank] or None, state [dt_rank][hv][hv].
    ``heads`` restricts it to those value heads (they are independent). Returns out [T][len(heads)][hv]
    and the final state [len(heads)][hv][hv], float64."""
    heads = np.arange(dims.dt_rank) if heads is None else np.asarray(heads)
    q, k, v = split_qkv(conv_out, dims)
    log_g = gate_log(alpha, dt_bias, ssm_a)
    scan = delta_net_chunked if chunked else delta_net_sequential
    return scan(
        q[:, heads], k[:, heads], v[:, heads], log_g[:, heads], sigmoid(beta)[:, heads], np.asarray(state)[heads]
    )


def conv1d_batched(x, weight, state, state_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Depthwise causal conv + SiLU over T tokens: x [T][C], weight [C][d_conv], state [(d_conv-1)][C]
    circular with the oldest sample at ``state_offset``. Returns out [T][C] and the updated state."""
    x = np.asarray(x, np.float64)
    w = np.asarray(weight, np.float64)
    s = np.array(state, np.float64)
    taps = w.shape[1]
    slots = taps - 1
    out = np.empty_like(x)
    off = state_offset % slots
    for t in range(x.shape[0]):
        acc = sum(s[(off + i) % slots] * w[:, i] for i in range(slots)) + x[t] * w[:, slots]
        out[t] = acc / (1.0 + np.exp(-acc))
        s[off] = x[t]
        off = (off + 1) % slots
    return out, s


def gated_norm(o, z, weight, dims: SsmDims, norm_per_head: bool) -> np.ndarray:
    """out = o * rsqrt(mean(o^2) + 1e-6) * w[idx] * silu(z) per (token, head); o, z [T][d_inner]."""
    o = np.asarray(o, np.float64).reshape(-1, dims.dt_rank, dims.head_v_dim)
    z = np.asarray(z, np.float64).reshape(o.shape)
    w = np.asarray(weight, np.float64)
    idx = (
        np.arange(dims.d_inner).reshape(dims.dt_rank, dims.head_v_dim)
        if norm_per_head
        else np.arange(dims.head_v_dim) % dims.d_state
    )
    scale = 1.0 / np.sqrt((o * o).mean(-1, keepdims=True) + NORM_EPS)
    return (o * scale * w[idx] * z / (1.0 + np.exp(-z))).reshape(o.shape[0], -1)
