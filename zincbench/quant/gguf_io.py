"""Read weight tensors from a GGUF file (with gguf-py's GGUFReader), in numpy axis order.

GGUF stores dims in ggml order (ne0 = the contiguous input dimension first); everything here uses
numpy order, the reverse: a projection is ``(rows, k)`` and an expert stack ``(n_experts, rows, k)``
with k = ne0. Quantized data comes back as its raw blocks, uint8 ``(..., rows, k/256*block_bytes)``;
arrays are read-only views of the memory-mapped file, so opening a large model costs no copy.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zincbench.errors import InputError
from zincbench.quant import FORMATS

FLOAT_TYPES = ("f32", "f16")
READABLE_TYPES = (*FORMATS, *FLOAT_TYPES)
EXPERT_ROLES = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
DENSE_ROLES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
_EXPERT_NAME = re.compile(r"blk\.(\d+)\.(" + "|".join(EXPERT_ROLES) + r")\.weight")


@dataclass
class QuantTensor:
    name: str
    qtype: str  # GGUF type name in lower case: "q4_k", "q6_k", "f32", "f16"
    shape: tuple[int, ...]  # logical shape in numpy order, e.g. (rows, k) or (n_experts, rows, k)
    data: np.ndarray  # uint8 blocks (..., rows, row_bytes) for quantized types, float32/float16 otherwise


def _tensors(path: str | os.PathLike) -> dict:
    """The file's tensors (gguf ReaderTensor) by name, in file order."""
    from gguf import GGUFReader  # imported here: only GGUF reading needs gguf-py

    p = Path(path)
    if not p.exists():
        raise InputError(f"GGUF file not found: {p}")
    if not p.is_file():
        raise InputError(f"expected a GGUF file, got a directory: {p}")
    try:
        reader = GGUFReader(p)
    except (ValueError, OSError, IndexError, KeyError) as exc:  # bad magic, truncated or corrupt header
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{p}: not a readable GGUF file ({reason})") from None
    return {t.name: t for t in reader.tensors}


def _type_name(tensor) -> str:
    return tensor.tensor_type.name.lower()


def _numpy_shape(tensor) -> tuple[int, ...]:
    return tuple(int(n) for n in reversed(tensor.shape.tolist()))


def _to_quant_tensor(path, tensor) -> QuantTensor:
    qtype = _type_name(tensor)
    if qtype not in READABLE_TYPES:
        raise InputError(
            f"{path}: tensor {tensor.name} has type {qtype}; readable types are {', '.join(READABLE_TYPES)}"
        )
    return QuantTensor(tensor.name, qtype, _numpy_shape(tensor), tensor.data)


def list_tensors(path: str | os.PathLike) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, type, numpy-order shape) of every tensor in the file, in file order."""
    return [(t.name, _type_name(t), _numpy_shape(t)) for t in _tensors(path).values()]


def read_tensor(path: str | os.PathLike, name: str) -> QuantTensor:
    tensors = _tensors(path)
    if name not in tensors:
        raise InputError(f"{path}: no tensor named {name!r} ({len(tensors)} tensors in the file)")
    return _to_quant_tensor(path, tensors[name])


def expert_tensors(path: str | os.PathLike, layer: int | None = None) -> dict[str, QuantTensor]:
    """The MoE expert stacks ``blk.N.ffn_{gate,up,down}_exps.weight`` present in one layer.

    Keyed by role ("ffn_gate_exps", ...); each is ``(n_experts, rows, k)``. ``layer=None`` takes the
    first layer that has any.
    """
    tensors = _tensors(path)
    layers = sorted({int(m.group(1)) for name in tensors if (m := _EXPERT_NAME.fullmatch(name))})
    if not layers:
        raise InputError(f"{path}: no MoE expert tensors (blk.N.ffn_{{gate,up,down}}_exps.weight)")
    if layer is None:
        layer = layers[0]
    elif layer not in layers:
        raise InputError(f"{path}: layer {layer} has no MoE expert tensors; layers with experts: {layers}")
    return _by_role(path, tensors, layer, EXPERT_ROLES)


def dense_projections(path: str | os.PathLike, layer: int) -> dict[str, QuantTensor]:
    """The attention and dense FFN projections of one layer that exist, keyed by role ("attn_q", ...)."""
    found = _by_role(path, _tensors(path), layer, DENSE_ROLES)
    if not found:
        raise InputError(f"{path}: layer {layer} has none of the dense projections ({', '.join(DENSE_ROLES)})")
    return found


def _by_role(path, tensors: dict, layer: int, roles: tuple[str, ...]) -> dict[str, QuantTensor]:
    named = ((role, f"blk.{layer}.{role}.weight") for role in roles)
    return {role: _to_quant_tensor(path, tensors[name]) for role, name in named if name in tensors}
