"""ZINC's debug tool ``cuda-dbg`` (src/dbg_cuda.zig) as an engine adapter.

``{bin} gen <prompt ids csv> <n_gen> <model>`` prints on stderr ``PROMPT_IDS:…``,
``PREFILL: T tokens in Xs = Y tok/s (…)`` (only when T > 1), ``GEN_IDS:x0,x1,…`` and
``DECODE: N tokens in Xs = Y tok/s (…)`` (only when n_gen > 1); ``{bin} tf <prompt> <ref> <model>``
prints ``TF_MATCH:m/n``. The tool keeps at most 256 prompt ids and drops the rest silently, so
longer prompts are refused here. It takes token ids, never text: ``throughput`` expects its
prompt as comma-separated ids (the prefill scripts use ``1,2,…,250``).
"""

from __future__ import annotations

import re

from zincbench.engines import generic
from zincbench.engines.base import TeacherForcedResult, ThroughputResult, register
from zincbench.engines.generic import (
    EngineSpec,
    GenerateSpec,
    GenericEngine,
    TeacherForcedSpec,
    ThroughputSpec,
    parse_ids,
    parse_ratio,
)
from zincbench.errors import InputError

MAX_PROMPT_IDS = 256
GEN_IDS_RE = r"GEN_IDS:([^\n]*)"
PROMPT_IDS_RE = r"PROMPT_IDS:([^\n]*)"
TF_MATCH_RE = r"TF_MATCH:\s*(\S+?)/(\S+)"
PREFILL_RE = r"PREFILL:\s*(\S+) tokens in \S+ = (\S+) tok/s"
DECODE_RE = r"DECODE:\s*(\S+) tokens in \S+ = (\S+) tok/s"
_IDS_CSV = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*$")

SPEC = EngineSpec(
    max_prompt_ids=MAX_PROMPT_IDS,
    generate=GenerateSpec("{bin} gen {prompt_ids} {n_gen} {model}", GEN_IDS_RE, PROMPT_IDS_RE),
    teacher_forced=TeacherForcedSpec("{bin} tf {prompt_ids} {ref_ids} {model}", TF_MATCH_RE),
    throughput=ThroughputSpec("{bin} gen {prompt} {n_gen} {model}", PREFILL_RE, DECODE_RE),
)


def parse_gen_ids(text: str) -> list[int]:
    return parse_ids(text, GEN_IDS_RE, "GEN_IDS line")


def parse_tf_match(text: str) -> TeacherForcedResult:
    return TeacherForcedResult(*parse_ratio(text, TF_MATCH_RE, "TF_MATCH line"))


def parse_throughput(text: str) -> ThroughputResult:
    """Rates from the PREFILL line (required) and the DECODE line (absent when n_gen is 1)."""
    return generic.parse_throughput(text, PREFILL_RE, DECODE_RE)


@register("zinc-dbg")
class ZincDbgEngine(GenericEngine):
    def __init__(self, bin: str | None = None, config=None):
        if not bin:
            raise InputError(
                "the zinc-dbg engine needs --engine-bin PATH (the cuda-dbg binary, "
                "e.g. the newest .zig-cache/o/*/cuda-dbg)"
            )
        if config is not None:
            raise InputError("the zinc-dbg engine takes no --engine-config (use --engine-kind generic)")
        super().__init__(SPEC, bin=bin)

    def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0) -> ThroughputResult:
        if not _IDS_CSV.match(prompt_text):
            raise InputError("zinc-dbg takes prompts as comma-separated token ids (e.g. 1,2,3), not text")
        return super().throughput(model, prompt_text.replace(" ", ""), n_gen, env=env, timeout_s=timeout_s)
