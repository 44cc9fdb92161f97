"""A tiny llama-architecture GGUF with random weights and an SPM vocabulary, for CPU-only tests.

llama.cpp loads it like any real model (see shared/reference/llamacpp.md §7), so the token
reference, the llama.cpp engine adapter and llama-bench can all run on it in a second. The weights
are seeded: the same arguments always give the same file. ``write_suppressed_copy`` makes a copy
whose greedy output changes at a chosen generated position (for "must fail here" tests).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

# Vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then word pieces that tokenize the default
# catalog prompt ("The capital of France is") into a handful of multi-character tokens.
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
WORD_PIECES = (
    ["▁"]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + ["T", "F", "P", ",", "."]
    + [
        "▁t",
        "he",
        "▁the",
        "▁T",
        "▁The",
        "▁c",
        "ap",
        "it",
        "al",
        "▁cap",
        "ital",
        "▁capital",
        "▁o",
        "▁of",
        "▁F",
        "ra",
        "nc",
        "▁Fra",
        "nce",
        "▁France",
        "▁i",
        "▁is",
        "▁P",
        "ar",
        "is",
        "▁Par",
        "▁Paris",
    ]
)
QUANT_TYPES = ("f32", "q4_k")


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Token strings, SPM merge scores (longer pieces merge first) and gguf token types."""
    from gguf import TokenType

    tokens = list(SPECIAL_TOKENS) + [f"<0x{b:02X}>" for b in range(256)] + list(WORD_PIECES)
    types = (
        [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
        + [TokenType.BYTE] * 256
        + [TokenType.NORMAL] * len(WORD_PIECES)
    )
    scores = [0.0] * (len(SPECIAL_TOKENS) + 256) + [float(len(p)) - i * 1e-3 for i, p in enumerate(WORD_PIECES)]
    return tokens, scores, [int(t) for t in types]


def _quantizer(quant: str | None):
    """(raw gguf type or None, function float32 2-D -> array to store) for a ``quant`` name."""
    from gguf import GGMLQuantizationType

    if quant in (None, "f32"):
        return None, lambda w: w
    if quant == "q4_k":
        from zincbench.quant.q4k import quantize  # our bit-exact Q4_K reference quantizer

        return GGMLQuantizationType.Q4_K, quantize
    raise ValueError(f"unknown quant {quant!r} (known: {', '.join(QUANT_TYPES)})")


def write_tiny_llama(
    path: str | os.PathLike,
    *,
    seed: int = 0,
    quant: str | None = None,
    n_layers: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 2,
    context_length: int = 512,
    name: str = "zincbench-tiny-llama",
) -> Path:
    """Write the model and return its path.

    ``quant="q4_k"`` stores every 2-D weight except ``token_embd`` as Q4_K (their row length must
    be a multiple of 256, hence the defaults); norms stay F32 as in real files.
    """
    import gguf

    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head and n_head by n_head_kv")
    raw_dtype, store = _quantizer(quant)
    rng = np.random.default_rng(seed)
    head_dim = n_embd // n_head
    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)

    def dense(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name(name)
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M if raw_dtype else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)

    def add_matrix(tensor_name: str, weights: np.ndarray) -> None:
        if raw_dtype is None:
            writer.add_tensor(tensor_name, weights)
        else:
            writer.add_tensor(tensor_name, store(weights), raw_dtype=raw_dtype)

    # Embeddings of unit scale and an output head of gain 4 give logits of spread ~4: clear
    # argmax margins, so greedy runs are reproducible across numerically different engines.
    writer.add_tensor("token_embd.weight", rng.standard_normal((n_vocab, n_embd)).astype(np.float32))
    for i in range(n_layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        add_matrix(f"blk.{i}.attn_q.weight", dense(n_embd, n_embd))
        add_matrix(f"blk.{i}.attn_k.weight", dense(n_head_kv * head_dim, n_embd))
        add_matrix(f"blk.{i}.attn_v.weight", dense(n_head_kv * head_dim, n_embd))
        add_matrix(f"blk.{i}.attn_output.weight", dense(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        add_matrix(f"blk.{i}.ffn_gate.weight", dense(n_ff, n_embd))
        add_matrix(f"blk.{i}.ffn_up.weight", dense(n_ff, n_embd))
        add_matrix(f"blk.{i}.ffn_down.weight", dense(n_embd, n_ff))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    add_matrix("output.weight", dense(n_vocab, n_embd, gain=4.0))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_suppressed_copy(src: str | os.PathLike, dst: str | os.PathLike, token_ids) -> Path:
    """Copy a GGUF with the output-head rows of ``token_ids`` zeroed (their logits become 0).

    All-zero bytes decode to zero in F32, F16 and the K-quants alike (d = dmin = 0). Positions
    where a suppressed token was the argmax now pick another token; every other position keeps
    its argmax as long as that logit is positive. Suppressing the token a reference generates at
    position p (one that does not occur earlier in the generation) therefore moves the first
    divergence to exactly p.
    """
    from gguf import GGUFReader

    src, dst = Path(src), Path(dst)
    head = next((t for t in GGUFReader(src).tensors if t.name == "output.weight"), None)
    if head is None:
        raise ValueError(f"{src}: no output.weight tensor (tied embeddings cannot be suppressed this way)")
    n_rows = int(head.shape[1])  # gguf lists ne order: [n_embd, n_vocab]
    row_bytes = int(head.n_bytes) // n_rows
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as fh:
        for token in sorted(set(int(t) for t in token_ids)):
            if not 0 <= token < n_rows:
                raise ValueError(f"token id {token} outside the vocabulary (0..{n_rows - 1})")
            fh.seek(int(head.data_offset) + token * row_bytes)
            fh.write(bytes(row_bytes))
    return dst
