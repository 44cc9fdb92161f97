"""GGUF files holding only weight tensors (random valid Q4_K/Q5_K/Q6_K blocks, random F32), for running
the microbench gates' `--gguf` path without a real model: an expert stack, a router, dense projections."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from zincbench.quant import get_format

GGML_TYPES = {
    "q4_k": gguf.GGMLQuantizationType.Q4_K,
    "q5_k": gguf.GGMLQuantizationType.Q5_K,
    "q6_k": gguf.GGMLQuantizationType.Q6_K,
}


def write_weights_gguf(
    path: str | os.PathLike, tensors: dict[str, tuple[str, tuple[int, ...]]], *, seed: int = 0
) -> dict[str, np.ndarray]:
    """``tensors``: name -> (format, numpy-order shape ending in K), e.g.
    {"blk.0.ffn_gate_exps.weight": ("q4_k", (256, 512, 2048))}; format "f32" writes standard normal
    float32 values. Returns what was written, by name."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(Path(path), arch="llama")
    written = {}
    for name, (fmt, shape) in tensors.items():
        *lead, k = shape
        rows = int(np.prod(lead))
        if fmt == "f32":
            written[name] = rng.standard_normal(shape, dtype=np.float32)
            writer.add_tensor(name, written[name])
            continue
        written[name] = get_format(fmt).random_blocks(rng, rows, k).reshape(*lead, -1)
        writer.add_tensor(name, written[name], raw_dtype=GGML_TYPES[fmt])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


if __name__ == "__main__":  # python -m zincbench.testing.weights_gguf OUT.gguf: qwen36-35b-a3b-shaped layer
    import sys

    write_weights_gguf(
        sys.argv[1],
        {
            "blk.0.ffn_gate_exps.weight": ("q4_k", (256, 512, 2048)),
            "blk.0.attn_output.weight": ("q4_k", (2048, 4096)),
            "blk.0.ffn_down.weight": ("q6_k", (2048, 512)),
            # the rest of the MoE block (`microbench layer --gguf`); the real shared expert is Q8_0
            "blk.0.ffn_gate_inp.weight": ("f32", (256, 2048)),
            "blk.0.ffn_up_exps.weight": ("q4_k", (256, 512, 2048)),
            "blk.0.ffn_down_exps.weight": ("q5_k", (256, 2048, 512)),
            "blk.0.ffn_gate_shexp.weight": ("q6_k", (512, 2048)),
            "blk.0.ffn_up_shexp.weight": ("q6_k", (512, 2048)),
            "blk.0.ffn_down_shexp.weight": ("q6_k", (2048, 512)),
            "blk.0.ffn_gate_inp_shexp.weight": ("f32", (2048,)),
        },
    )
