"""llama-bench as an engine, so two llama.cpp builds (or settings) can be A/B'd like engine builds.

One throughput measurement is one ``llama-bench -r 1 -o jsonl -p T -n N`` invocation: a pp T row
(prefill t/s) and a tg N row (decode t/s). llama-bench feeds random token ids, never text, so the
prompt length T is a constructor argument (``for_run`` takes the run's ``--prompt-tokens``); the
prompt text handed to ``throughput`` is ignored.
"""

from __future__ import annotations

from pathlib import Path

from zincbench.engines.base import THROUGHPUT, Engine, ThroughputResult, file_md5, register
from zincbench.errors import InputError
from zincbench.measure.llama_bench import run_llama_bench
from zincbench.measure.process import EngineFailure


@register("llama-bench")
class LlamaBenchEngine(Engine):
    capabilities = frozenset({THROUGHPUT})

    @classmethod
    def for_run(cls, bin=None, config=None, *, prompt_tokens: int = 512, llama=None) -> "LlamaBenchEngine":
        return cls(bin=bin, config=config, n_prompt=prompt_tokens)  # it feeds random ids: T is its argument

    def __init__(
        self,
        bin: str | Path | None = None,
        config=None,
        n_prompt: int = 512,
        n_gpu_layers: int = 99,
        extra_args: tuple[str, ...] = (),
    ):
        if not bin:
            raise InputError("the llama-bench engine needs the llama-bench binary")
        if config is not None:
            raise InputError("the llama-bench engine takes no engine config (use --engine-kind generic)")
        self.binary = Path(bin)
        self.n_prompt = n_prompt
        self.n_gpu_layers = n_gpu_layers
        self.extra_args = tuple(extra_args)

    def program(self):
        return self.binary

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "binary": str(self.binary),
            "md5": file_md5(self.binary),
            "n_prompt": self.n_prompt,
            "n_gpu_layers": self.n_gpu_layers,
            "extra_args": list(self.extra_args),
        }

    def throughput(
        self, model: Path, prompt_text: str, n_gen: int, *, env: dict[str, str] | None = None, timeout_s: float = 600.0
    ) -> ThroughputResult:
        rows = run_llama_bench(
            self.binary,
            model,
            self.n_prompt,
            n_gen,
            1,
            n_gpu_layers=self.n_gpu_layers,
            extra_args=self.extra_args,
            env=env,
            timeout_s=timeout_s,
        )
        pp = next((r for r in rows if r.is_prefill), None)
        tg = next((r for r in rows if r.is_decode), None)
        if pp is None:
            raise EngineFailure(
                "garbage", f"llama-bench printed no pp{self.n_prompt} row", "\n".join(r.test for r in rows)
            )
        return ThroughputResult(
            prefill_tokens=pp.n_prompt,
            prefill_tps=pp.avg_ts,
            decode_tokens=tg.n_gen if tg else None,
            decode_tps=tg.avg_ts if tg else None,
            extra={"build_commit": pp.build_commit, "backend": pp.backend, "gpu_info": pp.gpu_info},
        )
