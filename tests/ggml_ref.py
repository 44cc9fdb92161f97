"""ggml's C quantizers (libggml-base from the installed llama-cpp-python wheel) as a test oracle,
and the varied weight data the bit-exactness tests feed to both sides."""

from __future__ import annotations

import ctypes
import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

QK_K = 256
C_QUANTIZERS = {
    "q4_k": ("quantize_row_q4_K_ref", 144),
    "q5_k": ("quantize_row_q5_K_ref", 176),
    "q6_k": ("quantize_row_q6_K_ref", 210),
}


@lru_cache(maxsize=1)
def ggml_base() -> ctypes.CDLL:
    """libggml-base from llama_cpp's lib folder; skips the calling test when llama_cpp is absent."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        pytest.skip("llama-cpp-python is not installed: no C reference (pip install llama-cpp-python)")
    lib_dir = Path(spec.origin).parent / "lib"
    candidates = sorted(lib_dir.glob("libggml-base.*")) + sorted(lib_dir.glob("ggml-base.dll"))
    if not candidates:
        pytest.skip(f"llama-cpp-python has no libggml-base in {lib_dir}")
    lib = ctypes.CDLL(str(candidates[0]))
    for symbol, _ in C_QUANTIZERS.values():
        fn = getattr(lib, symbol)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn.restype = None
    return lib


def c_quantize(name: str, x: np.ndarray) -> np.ndarray:
    """quantize_row_*_ref over a float32 array ``(rows, k)`` -> ``(rows, k/256*block_bytes)`` bytes."""
    symbol, block_bytes = C_QUANTIZERS[name]
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros((x.size // QK_K, block_bytes), dtype=np.uint8)
    getattr(ggml_base(), symbol)(x.ctypes.data, out.ctypes.data, x.size)
    return out.reshape(*x.shape[:-1], -1)


def varied_blocks(rng: np.random.Generator, n_blocks: int) -> np.ndarray:
    """``n_blocks`` super-blocks ``(n_blocks, 256)`` float32 mixing the cases that break sloppy ports.

    Gaussian at several scales; scaled and offset data (all-positive / all-negative sub-blocks, so
    the min search and the min > 0 refit both run); quarter-step values (exact ties for
    round-half-to-even); heavy-tailed data with outliers; sub-blocks of zeros or of one constant
    inside otherwise normal blocks; whole all-zero and constant blocks; tiny magnitudes near
    ggml's 1e-15 "all zero" threshold.
    """
    kinds = 7
    per_kind = -(-n_blocks // kinds)
    shape = (per_kind, QK_K)
    scale = np.exp(rng.uniform(np.log(1e-4), np.log(10.0), (per_kind, 1)))
    gaussian = rng.standard_normal(shape) * scale
    offset = rng.standard_normal(shape) * scale + rng.uniform(-4, 4, (per_kind, 1)) * scale
    quarter_steps = rng.integers(-24, 25, shape) * 0.25 * rng.choice([1.0, 0.5, 2.0, 0.01], (per_kind, 1))
    heavy = rng.standard_t(2, shape) * scale
    heavy[rng.random(shape) < 0.01] *= 50  # outliers
    holes = rng.standard_normal(shape) * scale
    holes = holes.reshape(per_kind, 16, 16)
    holes[rng.random((per_kind, 16)) < 0.3] = 0  # whole zero sub-blocks (both Q4_K's and Q6_K's)
    holes[rng.random((per_kind, 16)) < 0.2] = rng.uniform(-1, 1)  # constant sub-blocks
    holes = holes.reshape(shape)
    constant = np.repeat(rng.uniform(-2, 2, (per_kind, 1)) * scale, QK_K, axis=1)
    constant[: per_kind // 4] = 0.0  # all-zero blocks
    constant[per_kind // 4 : per_kind // 2] = -(constant[per_kind // 4 : per_kind // 2] ** 2)  # negative
    tiny = rng.standard_normal(shape) * np.exp(rng.uniform(np.log(1e-17), np.log(1e-12), (per_kind, 1)))
    mixed = np.concatenate([gaussian, offset, quarter_steps, heavy, holes, constant, tiny])
    return mixed[rng.permutation(len(mixed))[:n_blocks]].astype(np.float32)
