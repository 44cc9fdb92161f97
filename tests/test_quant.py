"""Q4_K / Q6_K reference: bit-exact against ggml (gguf-py's dequantize, libggml-base's quantize),
random valid blocks, round-trip error, GGUF reading, and bad input."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from ggml_ref import c_quantize, ggml_base, varied_blocks
from gguf import GGMLQuantizationType

from zincbench.errors import InputError
from zincbench.quant import FORMATS, Q4K, Q5K, Q6K, check_row_length, get_format, gguf_io, q4k

GGUF_TYPES = {"q4_k": GGMLQuantizationType.Q4_K, "q5_k": GGMLQuantizationType.Q5_K, "q6_k": GGMLQuantizationType.Q6_K}
N_BLOCKS = 10_240


def test_registry_describes_the_ggml_types():
    assert (Q4K.ggml_type, Q4K.block_bytes, Q4K.block_weights) == (GGMLQuantizationType.Q4_K, 144, 256)
    assert (Q5K.ggml_type, Q5K.block_bytes, Q5K.block_weights) == (GGMLQuantizationType.Q5_K, 176, 256)
    assert (Q6K.ggml_type, Q6K.block_bytes, Q6K.block_weights) == (GGMLQuantizationType.Q6_K, 210, 256)
    for fmt in FORMATS.values():
        assert gguf.GGML_QUANT_SIZES[GGUF_TYPES[fmt.name]] == (fmt.block_weights, fmt.block_bytes)
        assert get_format(fmt.name.upper()) is fmt
        assert fmt.row_bytes(4096) == 16 * fmt.block_bytes


@pytest.mark.parametrize("name", FORMATS)
def test_dequantize_is_bit_identical_to_gguf_py(name, rng):
    fmt = FORMATS[name]
    blocks = fmt.random_blocks(rng, rows=N_BLOCKS // 16, k=16 * 256)
    ours = fmt.dequantize(blocks)
    theirs = gguf.quants.dequantize(blocks, GGUF_TYPES[name])
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (N_BLOCKS // 16, 16 * 256)
    assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("name", FORMATS)
def test_quantize_is_bit_identical_to_ggml_c_reference(name, rng):
    ggml_base()  # skips when llama-cpp-python is not installed
    x = varied_blocks(rng, N_BLOCKS).reshape(-1, 10 * 256)
    expected = c_quantize(name, x)
    ours = FORMATS[name].quantize(x)
    assert ours.shape == expected.shape == (N_BLOCKS // 10, 10 * FORMATS[name].block_bytes)
    mismatched = int((ours.reshape(N_BLOCKS, -1) != expected.reshape(N_BLOCKS, -1)).any(axis=1).sum())
    assert mismatched == 0, f"{mismatched} of {N_BLOCKS} blocks differ from ggml"


@pytest.mark.parametrize("name", FORMATS)
def test_quantize_keeps_leading_axes(name, rng):
    fmt = FORMATS[name]
    x = rng.standard_normal((2, 3, 512)).astype(np.float32)
    q = fmt.quantize(x)
    assert q.shape == (2, 3, 2 * fmt.block_bytes)
    assert np.array_equal(q.reshape(6, -1), fmt.quantize(x.reshape(6, 512)))
    assert fmt.dequantize(q).shape == x.shape


# Relative RMS error of dequantize(quantize(x)) on Gaussian data, measured on 20,000 blocks at
# sigma 1e-3..100: Q4_K 0.0714 overall, worst block 0.088; Q5_K 0.0361-0.0370 overall, worst block
# 0.045; Q6_K 0.0177 overall (0.0205 at sigma 1e-3, where d becomes an fp16 subnormal), worst block 0.031.
ROUND_TRIP_BOUNDS = {"q4_k": (0.075, 0.10), "q5_k": (0.038, 0.05), "q6_k": (0.019, 0.035)}


@pytest.mark.parametrize("sigma", [0.02, 1.0])
@pytest.mark.parametrize("name", FORMATS)
def test_round_trip_error_is_bounded(name, sigma, sample_rng):
    """A statistical claim (the worst of 2048 Gaussian blocks stays under the worst of 20,000 measured,
    with margin): pinned data, so a change of the code, not of the draw, is what can turn it red."""
    fmt = FORMATS[name]
    x = (sample_rng.standard_normal((2048, 256)) * sigma).astype(np.float32)
    err = fmt.dequantize(fmt.quantize(x)) - x
    overall = np.sqrt((err**2).mean() / (x**2).mean())
    per_block = np.sqrt((err**2).mean(axis=1) / (x**2).mean(axis=1))
    overall_bound, block_bound = ROUND_TRIP_BOUNDS[name]
    assert overall < overall_bound
    assert per_block.max() < block_bound


@pytest.mark.parametrize("name", FORMATS)
def test_zero_and_constant_blocks(name):
    fmt = FORMATS[name]
    x = np.zeros((3, 256), dtype=np.float32)
    x[1] = 0.37
    x[2] = -1.25
    y = fmt.dequantize(fmt.quantize(x))
    assert np.array_equal(y[0], np.zeros(256, np.float32))
    np.testing.assert_allclose(y[1:], x[1:], rtol=2e-3)


def test_q6_k_all_zero_block_is_all_zero_bytes():
    assert not Q6K.quantize(np.zeros((1, 256), np.float32)).any()


def fp16_field(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The fp16 at byte ``offset`` of each block ``(n, block_bytes)``, as float32 ``(n,)``."""
    return blocks[:, offset : offset + 2].copy().view(np.float16)[:, 0].astype(np.float32)


def test_q4_k_random_blocks_cover_every_code(rng):
    blocks = Q4K.random_blocks(rng, rows=64, k=64 * 256).reshape(-1, 144)
    scale, minimum = q4k.unpack_scale_min(blocks[:, 4:16])
    assert set(np.unique(scale)) == set(range(64)) and set(np.unique(minimum)) == set(range(64))
    qs = blocks[:, 16:]
    assert set(np.unique(qs & 0xF)) == set(np.unique(qs >> 4)) == set(range(16))
    d, dmin = fp16_field(blocks, 0), fp16_field(blocks, 2)
    assert d.min() >= 0.99e-4 and d.max() <= 3.01e-2  # the documented range, after fp16 rounding
    assert (dmin > 0).all() and np.isfinite(dmin).all()
    assert np.isfinite(Q4K.dequantize(blocks)).all()


def test_q6_k_random_blocks_cover_every_code(rng):
    blocks = Q6K.random_blocks(rng, rows=64, k=64 * 256).reshape(-1, 210)
    scales = blocks[:, 192:208].view(np.int8)
    d = fp16_field(blocks, 208)
    sub_scale = d[:, None] * scales.astype(np.float32)
    assert sub_scale.shape == (len(blocks), 16)
    nonzero = sub_scale != 0  # a sub-block with scale 0 shows no level
    levels = np.rint(Q6K.dequantize(blocks).reshape(-1, 16, 16)[nonzero] / sub_scale[nonzero][:, None])
    assert set(np.unique(levels)) == set(range(-32, 32))
    assert set(np.unique(scales)) == set(range(-128, 128))
    assert np.abs(d).min() >= 0.99e-5 and np.abs(d).max() <= 1.01e-3
    assert np.isfinite(Q6K.dequantize(blocks)).all()


@pytest.mark.parametrize("name", FORMATS)
def test_random_blocks_are_reproducible_and_shaped(name):
    fmt = FORMATS[name]
    a = fmt.random_blocks(np.random.default_rng(7), rows=3, k=512)
    b = fmt.random_blocks(np.random.default_rng(7), rows=3, k=512)
    assert a.dtype == np.uint8 and a.shape == (3, 2 * fmt.block_bytes)
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    "call",
    [
        lambda: check_row_length(300),
        lambda: Q4K.quantize(np.zeros((2, 300), np.float32)),
        lambda: Q6K.quantize(np.array([[np.nan] * 256], np.float32)),
        lambda: Q4K.quantize(np.zeros(256, np.int32)),
        lambda: Q4K.dequantize(np.zeros((2, 145), np.uint8)),
        lambda: Q6K.dequantize(np.zeros((1, 210), np.float32)),
        lambda: Q4K.random_blocks(np.random.default_rng(), 2, 100),
        lambda: get_format("q8_k"),
        lambda: Q5K.dequantize(np.zeros((1, 177), np.uint8)),
    ],
)
def test_bad_input_is_one_input_error(call):
    with pytest.raises(InputError) as info:
        call()
    assert "\n" not in str(info.value)


def test_row_length_message_names_k():
    with pytest.raises(InputError, match=r"K=300 is not a multiple of 256"):
        check_row_length(300)


@pytest.fixture
def small_gguf(tmp_path, rng):
    """A GGUF with a Q4_K expert stack in layer 1, Q6_K/Q4_K projections in layer 0, and a norm."""
    tensors = {
        "blk.0.attn_q.weight": (Q4K.random_blocks(rng, 64, 512), GGMLQuantizationType.Q4_K),
        "blk.0.ffn_down.weight": (Q6K.random_blocks(rng, 32, 256), GGMLQuantizationType.Q6_K),
        "blk.0.attn_norm.weight": (np.arange(512, dtype=np.float32), None),
        "blk.0.token_types.weight": (np.zeros((2, 34), np.uint8), GGMLQuantizationType.Q8_0),
        "blk.1.ffn_gate_exps.weight": (
            Q4K.random_blocks(rng, 4 * 16, 512).reshape(4, 16, -1),
            GGMLQuantizationType.Q4_K,
        ),
        "blk.1.ffn_down_exps.weight": (
            Q6K.random_blocks(rng, 4 * 32, 256).reshape(4, 32, -1),
            GGMLQuantizationType.Q6_K,
        ),
    }
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(path, arch="llama")
    for name, (data, raw_dtype) in tensors.items():
        writer.add_tensor(name, data, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, tensors


def test_gguf_tensors_read_back_in_numpy_order(small_gguf):
    path, tensors = small_gguf
    listed = {name: (qtype, shape) for name, qtype, shape in gguf_io.list_tensors(path)}
    assert listed["blk.0.attn_q.weight"] == ("q4_k", (64, 512))
    assert listed["blk.1.ffn_down_exps.weight"] == ("q6_k", (4, 32, 256))
    assert listed["blk.0.attn_norm.weight"] == ("f32", (512,))
    assert listed["blk.0.token_types.weight"] == ("q8_0", (2, 32))

    q = gguf_io.read_tensor(path, "blk.0.ffn_down.weight")
    assert (q.qtype, q.shape) == ("q6_k", (32, 256))
    assert np.array_equal(q.data, tensors["blk.0.ffn_down.weight"][0])
    norm = gguf_io.read_tensor(path, "blk.0.attn_norm.weight")
    assert norm.data.dtype == np.float32 and np.array_equal(norm.data, np.arange(512))


def test_gguf_expert_and_dense_lookup(small_gguf):
    path, tensors = small_gguf
    experts = gguf_io.expert_tensors(path)  # layer 0 has none: the first layer with experts is 1
    assert set(experts) == {"ffn_gate_exps", "ffn_down_exps"}
    gate = experts["ffn_gate_exps"]
    assert (gate.name, gate.qtype, gate.shape) == ("blk.1.ffn_gate_exps.weight", "q4_k", (4, 16, 512))
    assert np.array_equal(gate.data, tensors["blk.1.ffn_gate_exps.weight"][0])
    assert set(gguf_io.expert_tensors(path, layer=1)) == set(experts)

    dense = gguf_io.dense_projections(path, 0)
    assert {role: t.shape for role, t in dense.items()} == {"attn_q": (64, 512), "ffn_down": (32, 256)}


def test_gguf_bad_inputs_are_input_errors(small_gguf, tmp_path):
    path, _ = small_gguf
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("not a model\n" * 10)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(path.read_bytes()[:64])
    cases = [
        (lambda: gguf_io.list_tensors(tmp_path / "missing.gguf"), "not found"),
        (lambda: gguf_io.list_tensors(tmp_path), "directory"),
        (lambda: gguf_io.list_tensors(not_gguf), "not a readable GGUF"),
        (lambda: gguf_io.list_tensors(truncated), "not a readable GGUF"),
        (lambda: gguf_io.read_tensor(path, "output.weight"), "no tensor named 'output.weight'"),
        (lambda: gguf_io.read_tensor(path, "blk.0.token_types.weight"), "type q8_0"),
        (lambda: gguf_io.expert_tensors(path, layer=0), "layer 0 has no MoE expert tensors"),
        (lambda: gguf_io.dense_projections(path, 1), "layer 1 has none of the dense projections"),
    ]
    for call, message in cases:
        with pytest.raises(InputError, match=message) as info:
            call()
        assert "\n" not in str(info.value)
