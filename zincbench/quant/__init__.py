"""Q4_K / Q5_K / Q6_K super-blocks in NumPy: reference quantize/dequantize, random valid blocks, GGUF reading.

``FORMATS`` maps a GGUF format name to its description and functions, so callers pick a format by name
(``get_format("q4_k")``) instead of importing a module per format. ``REPACKED`` holds the layouts an engine may
repack a GGUF format into when it loads a model (``q6_k_r``: Q6_K in 16-byte aligned blocks); ``get_format``
finds both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from zincbench.errors import InputError
from zincbench.quant import q4k, q5k, q6k, q6k_r
from zincbench.quant.blocks import QK_K, check_row_length


@dataclass(frozen=True)
class QuantFormat:
    name: str  # "q4_k", as GGUF type names are spelled in lower case
    ggml_type: int | None  # GGMLQuantizationType value; None for a repacked layout (no GGUF type)
    block_bytes: int
    block_weights: int
    dequantize: Callable[[np.ndarray], np.ndarray]
    quantize: Callable[[np.ndarray], np.ndarray]
    random_blocks: Callable[[np.random.Generator, int, int], np.ndarray]

    def row_bytes(self, k: int) -> int:
        """Bytes of one row of ``k`` weights."""
        check_row_length(k)
        return k // self.block_weights * self.block_bytes


Q4K = QuantFormat(q4k.NAME, q4k.GGML_TYPE, q4k.BLOCK_BYTES, QK_K, q4k.dequantize, q4k.quantize, q4k.random_blocks)
Q5K = QuantFormat(q5k.NAME, q5k.GGML_TYPE, q5k.BLOCK_BYTES, QK_K, q5k.dequantize, q5k.quantize, q5k.random_blocks)
Q6K = QuantFormat(q6k.NAME, q6k.GGML_TYPE, q6k.BLOCK_BYTES, QK_K, q6k.dequantize, q6k.quantize, q6k.random_blocks)
Q6KR = QuantFormat(q6k_r.NAME, None, q6k_r.BLOCK_BYTES, QK_K, q6k_r.dequantize, q6k_r.quantize, q6k_r.random_blocks)
FORMATS: dict[str, QuantFormat] = {fmt.name: fmt for fmt in (Q4K, Q5K, Q6K)}
REPACKED: dict[str, QuantFormat] = {Q6KR.name: Q6KR}
# GGUF format -> (the layout an engine may repack it into at load, the function that does)
REPACKS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {Q6K.name: (Q6KR.name, q6k_r.repack)}


def get_format(name: str) -> QuantFormat:
    key = str(name).lower()
    fmt = FORMATS.get(key) or REPACKED.get(key)
    if fmt is None:
        raise InputError(f"unknown quantization format {name!r}; known: {', '.join([*FORMATS, *REPACKED])}")
    return fmt


__all__ = [
    "FORMATS",
    "Q4K",
    "Q5K",
    "Q6K",
    "Q6KR",
    "QK_K",
    "REPACKED",
    "REPACKS",
    "QuantFormat",
    "check_row_length",
    "get_format",
]
