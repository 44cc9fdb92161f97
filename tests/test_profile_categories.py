"""Kernel category rules: the bundled YAML on the engine's real kernel names, rule order, bad rule files."""

import pandas as pd
import pytest

from zincbench.errors import ConfigError
from zincbench.profile.categories import category_table, load_rules, strip_parameters


@pytest.fixture(scope="module")
def rules():
    return load_rules()


# Kernel names from shared/reference/zinc-kernels.md (the engine), nsys/ncu outputs in
# shared/reference/profiling.md (cuBLAS on Hopper, PyTorch, CuPy) and the capture workload.
@pytest.mark.parametrize(
    "name, category",
    [
        ("nvjet_sm90_hsh_128x64_64x8_1x2_h_bz_NNT", "gemm"),
        ("gemm_q4k_tc_f16a_lowsmem", "gemm"),
        ("gemm_q4k_gate_up_swiglu_lowsmem", "gemm"),  # a GEMM with a fused epilogue, not elementwise
        ("gemm_q4k_experts_grouped_tc", "gemm"),
        (
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_16x16_128x2_nn_align8>(T1::Params)",
            "gemm",
        ),
        ("dmmv_q4k_experts_batched", "matvec"),  # has "expert" but is the matvec
        ("dmmv_q4k_fast", "matvec"),
        ("dequant_q4k_to_f16", "dequant"),
        ("quantize_act_q8_0", "dequant"),
        ("softmax_topk_batched", "moe-routing"),  # softmax, but the router's
        ("build_expert_order_padded", "moe-routing"),
        ("gather_by_order", "moe-routing"),
        ("scatter_by_order", "moe-routing"),
        ("moe_weighted_acc_batched", "moe-routing"),
        ("void gather_rows<float, (int)4>(const float *, const int *, float *, int, int)", "moe-routing"),
        ("ssm_delta_net_warp", "ssm-scan"),
        ("ssm_delta_net", "ssm-scan"),
        ("ssm_conv1d_batched", "conv1d"),
        ("ssm_gated_norm_batched", "norm"),
        ("rms_norm", "norm"),
        ("qwen_norm_rope_qkv", "norm"),
        ("attention_causal_batched", "attention"),
        ("kv_cache_write_batched", "attention"),
        ("rope_batched", "attention"),
        ("swiglu", "elementwise"),
        ("f32_to_f16", "elementwise"),
        ("sigmoid_scale_acc_batched", "elementwise"),
        ("cupy_copy__float32_float16", "elementwise"),
        (
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctorOnSelf_add<float>, "
            "std::array<char *, (unsigned long)2>>(int, T2, T3)",
            "elementwise",
        ),
        ("[CUDA memcpy Host-to-Device]", "memcpy/memset"),
        ("[CUDA memset]", "memcpy/memset"),
        ("zb_spin_until_released", "harness"),  # zincbench's timer (measure/timer.py)
        ("spin_until_released", "other"),
    ],
)
def test_bundled_rules_classify_real_kernel_names(rules, name, category):
    assert rules.classify(name) == category


def test_parameter_types_do_not_decide_the_category(rules):
    # "__half" or "gemm" in an argument type must not make a norm kernel a GEMM.
    assert rules.classify("void rms_norm_f32(const float *, cutlass::gemm::GemmCoord)") == "norm"
    assert rules.classify("void at::native::normal_kernel<float>(float *)") != "norm"


def test_strip_parameters():
    assert strip_parameters("void k<float, (int)4>(const float *, int)") == "void k<float, (int)4>"
    assert strip_parameters("kernel") == "kernel"
    assert strip_parameters("[CUDA memset]") == "[CUDA memset]"
    assert strip_parameters("void f(void (*)(int))") == "void f"


def test_category_table_shares_and_order(rules):
    kernels = pd.DataFrame(
        {
            "name": ["gemm_a", "gemm_b", "rms_norm", "mystery"],
            "calls": [1, 2, 3, 4],
            "total_ns": [600.0, 200.0, 150.0, 50.0],
        }
    )
    table = category_table(kernels, rules)
    assert list(table["category"]) == ["gemm", "norm", "other"]
    assert list(table["kernels"]) == [2, 1, 1]
    assert list(table["calls"]) == [3, 3, 4]
    assert table["share"].tolist() == pytest.approx([0.8, 0.15, 0.05])


def test_category_table_of_nothing(rules):
    assert category_table(pd.DataFrame(columns=["name", "calls", "total_ns"]), rules).empty


def test_custom_rules_file_first_match_wins(tmp_path):
    path = tmp_path / "cats.yaml"
    path.write_text(
        "default: misc\nrules:\n  - {category: first, pattern: 'a'}\n  - {category: second, pattern: 'ab'}\n"
    )
    custom = load_rules(path)
    assert custom.classify("ab") == "first"
    assert custom.classify("zzz") == "misc"
    assert custom.categories() == ["first", "second", "misc"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("rules:\n  - {category: x, pattern: '('}\n", "invalid regex"),
        ("rules:\n  - {category: x, regex: 'a'}\n", "unknown key 'regex'"),
        ("default: other\n", "missing required key 'rules'"),
    ],
)
def test_bad_rules_file_is_a_config_error(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_rules(path)
