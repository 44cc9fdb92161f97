"""The engine's main binary (``zinc``): ``{bin} -m {model} --prompt {prompt} --raw -n {n_gen}``.

It logs two throughput lines (std.log on stderr, usually with a prefix such as ``info(forward): ``):

    Prefill complete: N tokens in X ms (Y tok/s)
    Generated N tokens in X ms — Y tok/s (Z ms/tok)        (the dash is an em dash, U+2014)

``--raw`` matters: without it gemma prompts get the chat template applied and change length.
"""

from __future__ import annotations

import re
from pathlib import Path

from zincbench.engines.base import THROUGHPUT, Engine, ThroughputResult, file_md5, register
from zincbench.errors import InputError
from zincbench.measure.process import EngineFailure, checked, run_process

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
PREFILL_LINE = re.compile(rf"Prefill complete: ([0-9]+) tokens in {_NUMBER} ms \({_NUMBER} tok/s\)")
# The em dash is the documented separator; an ASCII dash is accepted for logs that were transliterated.
DECODE_LINE = re.compile(
    rf"Generated ([0-9]+) tokens in {_NUMBER} ms (?:\u2014|-{{1,2}}) {_NUMBER} tok/s \({_NUMBER} ms/tok\)"
)


def parse_throughput(output: str) -> ThroughputResult:
    """The last Prefill/Generated lines of a run's combined output; no Prefill line is garbage."""
    prefills = PREFILL_LINE.findall(output)
    if not prefills:
        raise EngineFailure(
            "garbage",
            "no 'Prefill complete: N tokens in X ms (Y tok/s)' line in the output",
            "\n".join(output.strip().splitlines()[-15:]),
        )
    tokens, prefill_ms, prefill_tps = prefills[-1]
    result = ThroughputResult(
        prefill_tokens=int(tokens), prefill_tps=float(prefill_tps), extra={"prefill_ms": float(prefill_ms)}
    )
    decodes = DECODE_LINE.findall(output)
    if decodes:
        generated, decode_ms, decode_tps, ms_per_tok = decodes[-1]
        result.decode_tokens = int(generated)
        result.decode_tps = float(decode_tps)
        result.extra.update(decode_ms=float(decode_ms), ms_per_token=float(ms_per_tok))
    return result


@register("zinc-main")
class ZincMain(Engine):
    capabilities = frozenset({THROUGHPUT})

    def __init__(self, bin: str | Path | None = None, config=None, extra_args: tuple[str, ...] = ()):
        if not bin:
            raise InputError("the zinc-main engine needs the zinc binary (e.g. zig-out/bin/zinc)")
        if config is not None:
            raise InputError("the zinc-main engine takes no engine config (use --engine-kind generic)")
        self.binary = Path(bin)
        self.extra_args = tuple(extra_args)

    def program(self):
        return self.binary

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "binary": str(self.binary),
            "md5": file_md5(self.binary),
            "extra_args": list(self.extra_args),
        }

    def throughput(
        self, model: Path, prompt_text: str, n_gen: int, *, env: dict[str, str] | None = None, timeout_s: float = 600.0
    ) -> ThroughputResult:
        argv = [self.binary, "-m", model, "--prompt", prompt_text, "--raw", "-n", str(n_gen), *self.extra_args]
        result = checked(run_process(argv, env=env, timeout_s=timeout_s))
        # The lines go to stderr (std.log); the scoreboard script reads 2>&1, so search both.
        return parse_throughput(result.stderr + "\n" + result.stdout)
