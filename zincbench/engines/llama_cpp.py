"""llama.cpp through llama-cpp-python: the greedy token reference, and an engine adapter.

``LlamaCppModel`` tokenizes, decodes greedily by taking the argmax of the logits it evaluated
(first index wins ties, as llama.cpp's greedy sampler does) with a fixed n_batch, and reports the
top-2 logits of each generated position so a near-tie is visible. zincbench never loads it in its
own process: ``decode_reference`` runs it in a child (``… ref PROMPT N MODEL``), so a native crash
of libllama (SIGILL from a build using CPU instructions this host lacks) is one line naming the
signal and the fix, not a dead zincbench.

As an *engine* (kind ``llama-cpp``) it runs in a child process, ``python -m
zincbench.engines.llama_cpp gen|tf …``, which speaks cuda-dbg's line protocol (``PROMPT_IDS:``,
``GEN_IDS:``, ``TF_MATCH:``): so every run gets a timeout and a crash is an ERROR row, and another
llama.cpp build can be validated against the reference by pointing the child at its libllama
(``--engine-bin DIR`` sets ``LLAMA_CPP_LIB_PATH``), or other settings (GPU layers, batch size).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import signal
import sys
from pathlib import Path

import numpy as np

from zincbench.engines.base import GENERATE, TEACHER_FORCED, register
from zincbench.engines.generic import EngineSpec, GenerateSpec, GenericEngine, TeacherForcedSpec, ids_csv
from zincbench.engines.zinc_dbg import GEN_IDS_RE, PROMPT_IDS_RE, TF_MATCH_RE
from zincbench.errors import EnvironmentProblem, ExitCode, InputError, ZincbenchError
from zincbench.measure.process import run_process, signal_name

PORTABLE_REBUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --no-cache-dir --force-reinstall '
    "--no-binary llama-cpp-python llama-cpp-python"
)
REFERENCE_PREFIX = "REFERENCE:"


def install_hint() -> str:
    from zincbench.install import extra_hint

    return extra_hint("reference")


def import_llama_cpp():
    try:
        import llama_cpp
    except ImportError:
        raise EnvironmentProblem(
            f"this needs llama.cpp's Python binding (llama-cpp-python, the optional `reference` "
            f"extra), which is not installed: {install_hint()}"
        ) from None
    except (OSError, RuntimeError) as exc:  # its libllama (LLAMA_CPP_LIB_PATH, when set) failed to load
        raise EnvironmentProblem(f"llama-cpp-python could not load libllama: {type(exc).__name__}: {exc}") from None
    return llama_cpp


def llama_cpp_version() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    return import_llama_cpp().__version__


@dataclasses.dataclass(frozen=True)
class LlamaSettings:
    """Everything that can change llama.cpp's numbers; recorded with every reference."""

    n_gpu_layers: int = 0  # 0 = CPU, bit-stable; -1 = all layers on the GPU
    n_batch: int = 512  # prompt chunking changes kernel paths, so it is fixed, not automatic
    n_ctx: int = 512
    n_threads: int | None = None

    def cli_args(self) -> list[str]:
        args = ["--n-gpu-layers", str(self.n_gpu_layers), "--n-batch", str(self.n_batch), "--n-ctx", str(self.n_ctx)]
        return args + (["--threads", str(self.n_threads)] if self.n_threads else [])


@dataclasses.dataclass
class Decoded:
    """Argmax at each decoded position, and (top1 id, top1 logit, top2 id, top2 logit) there."""

    ids: list[int]
    top2: list[tuple[int, float, int, float]]


class LlamaCppModel:
    def __init__(self, path: str | Path, settings: LlamaSettings = LlamaSettings()):
        llama_cpp = import_llama_cpp()
        self.path = Path(path)
        self.settings = settings
        if not self.path.is_file():
            raise InputError(f"GGUF not found: {self.path}")
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(self.path),
                n_gpu_layers=settings.n_gpu_layers,
                n_ctx=settings.n_ctx,
                n_batch=settings.n_batch,
                n_ubatch=settings.n_batch,
                n_threads=settings.n_threads,
                logits_all=False,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise InputError(f"llama.cpp could not load {self.path}: {exc}") from None
        self._llama_cpp = llama_cpp

    def tokenize(self, text: str) -> list[int]:
        """Token ids as llama.cpp reads a raw prompt: BOS added, special tokens not parsed."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    def decode(self, prompt_ids: list[int], n: int, forced: list[int] | None = None) -> Decoded:
        """Evaluate the prompt, then n positions feeding back the argmax (or ``forced`` ids)."""
        if not prompt_ids:
            raise InputError("llama.cpp needs at least one prompt token")
        if len(prompt_ids) + n > self.settings.n_ctx:
            raise InputError(f"{len(prompt_ids)} prompt + {n} generated tokens exceed n_ctx {self.settings.n_ctx}")
        llm = self.llm
        llm.reset()
        llm.eval(list(prompt_ids))
        ids, top2 = [], []
        for i in range(n):
            logits = np.ctypeslib.as_array(self._llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            first, second = np.argsort(-logits, kind="stable")[:2]  # stable: the lowest index wins a tie
            ids.append(int(first))
            top2.append((int(first), float(logits[first]), int(second), float(logits[second])))
            if i + 1 < n:
                llm.eval([forced[i] if forced is not None else int(first)])
        return Decoded(ids, top2)

    def greedy(self, prompt_ids: list[int], n_gen: int) -> Decoded:
        return self.decode(prompt_ids, n_gen)

    def teacher_forced(self, prompt_ids: list[int], reference_ids: list[int]) -> tuple[int, int]:
        """How many positions' argmax equals the reference's next id when fed the reference."""
        decoded = self.decode(prompt_ids, len(reference_ids), forced=list(reference_ids))
        return sum(a == b for a, b in zip(decoded.ids, reference_ids)), len(reference_ids)

    def close(self) -> None:
        self.llm.close()


def decode_reference(
    gguf: str | Path, prompt: str, n_gen: int, settings: LlamaSettings = LlamaSettings(), timeout_s: float = 600.0
) -> tuple[list[int], Decoded]:
    """(prompt ids, greedy decode with top-2 logits) of llama.cpp, computed in a child process.

    A child that dies of a signal, times out or cannot load the library is an EnvironmentProblem
    (exit 4) whose one line says what happened and how to fix it; a model llama.cpp rejects is an
    InputError (the child's own message).
    """
    argv = [sys.executable, "-m", __name__, "ref", prompt, str(n_gen), str(gguf), *settings.cli_args()]
    result = run_process(argv, timeout_s=timeout_s)
    name = Path(gguf).name
    last_line = (result.stderr.strip().splitlines() or ["(no output)"])[-1].removeprefix("error: ")
    if result.fatal_signal == signal.SIGILL:  # an instruction this CPU lacks: a native build's AMX, AVX-512, ...
        raise EnvironmentProblem(
            f"llama.cpp crashed: killed by SIGILL while decoding {name} (a libllama built for CPU features this host "
            f"lacks, such as AMX); rebuild it portably: {PORTABLE_REBUILD}"
        )
    if result.fatal_signal is not None:
        raise EnvironmentProblem(
            f"llama.cpp crashed: killed by {signal_name(result.fatal_signal)} while decoding "
            f"{name} (last output: {last_line})"
        )
    if result.timed_out:
        raise EnvironmentProblem(f"llama.cpp reference for {name} timed out after {timeout_s:g} s")
    if result.returncode == ExitCode.USAGE:
        raise InputError(f"llama.cpp reference for {name}: {last_line}")
    if result.returncode != 0:
        raise EnvironmentProblem(f"llama.cpp reference for {name} exited with code {result.returncode}: {last_line}")
    lines = [line for line in result.stdout.splitlines() if line.startswith(REFERENCE_PREFIX)]
    try:
        data = json.loads(lines[-1].removeprefix(REFERENCE_PREFIX))
        return data["prompt_ids"], Decoded(data["ids"], [tuple(t) for t in data["top2"]])
    except (IndexError, ValueError, KeyError, TypeError):
        raise EnvironmentProblem(
            f"llama.cpp reference for {name}: no readable {REFERENCE_PREFIX} line in the child's output ({last_line})"
        ) from None


@register("llama-cpp")
class LlamaCppEngine(GenericEngine):
    """llama.cpp as the engine under test; ``bin`` is an optional libllama folder (another build)."""

    capabilities = frozenset({GENERATE, TEACHER_FORCED})

    @classmethod
    def for_run(cls, bin=None, config=None, *, prompt_tokens: int = 512, llama=None) -> "LlamaCppEngine":
        return cls(bin=bin, config=config, **({"settings": llama} if llama is not None else {}))

    def __init__(self, bin: str | None = None, config=None, settings: LlamaSettings = LlamaSettings()):
        if config is not None:
            raise InputError("the llama-cpp engine takes no --engine-config (use --engine-kind generic)")
        if importlib.util.find_spec("llama_cpp") is None:
            raise EnvironmentProblem(
                f"the llama-cpp engine needs llama.cpp's Python binding (llama-cpp-python, the "
                f"optional `reference` extra), which is not installed: {install_hint()}"
            )
        if bin is not None and not Path(bin).is_dir():
            raise InputError(f"llama-cpp --engine-bin must be a folder holding libllama, got {bin}")
        self.lib_path = bin
        self.settings = settings

        def child(arguments: str) -> str:  # {bin} is this interpreter
            return " ".join([f"{{bin}} -m {__name__}", arguments, *settings.cli_args()])

        spec = EngineSpec(
            env={"LLAMA_CPP_LIB_PATH": str(Path(bin).resolve())} if bin else {},
            generate=GenerateSpec(child("gen {prompt_ids} {n_gen} {model}"), GEN_IDS_RE, PROMPT_IDS_RE),
            teacher_forced=TeacherForcedSpec(child("tf {prompt_ids} {ref_ids} {model}"), TF_MATCH_RE),
        )
        super().__init__(spec, bin=sys.executable)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "lib_path": self.lib_path,
            "llama_cpp_python": llama_cpp_version(),
            **dataclasses.asdict(self.settings),
        }


def main(argv: list[str] | None = None) -> None:
    """The child process: ``gen IDS N MODEL`` or ``tf IDS REF_IDS MODEL`` (cuda-dbg's output lines),
    or ``ref PROMPT N MODEL`` (one ``REFERENCE:{json}`` line: prompt ids, greedy ids, top-2 logits)."""
    import click

    def parse_csv(text: str) -> list[int]:
        fields = text.split(",")
        if not all(field.isascii() and field.isdigit() for field in fields):  # int() would take "2_16", "+197"
            raise click.BadParameter(f"expected comma-separated token ids, got {text!r}")
        return [int(x) for x in fields]

    @click.command()
    @click.argument("mode", type=click.Choice(["gen", "tf", "ref"]))
    @click.argument("prompt_ids", metavar="PROMPT_IDS|PROMPT")
    @click.argument("n_gen_or_ref_ids", metavar="N_GEN|REF_IDS")
    @click.argument("model", type=click.Path(dir_okay=False))
    @click.option("--n-gpu-layers", type=int, default=0)
    @click.option("--n-batch", type=int, default=512)
    @click.option("--n-ctx", type=int, default=512)
    @click.option("--threads", type=int, default=None)
    def child(mode, prompt_ids, n_gen_or_ref_ids, model, n_gpu_layers, n_batch, n_ctx, threads):
        second = parse_csv(n_gen_or_ref_ids)
        llm = LlamaCppModel(model, LlamaSettings(n_gpu_layers, n_batch, n_ctx, threads))
        if mode == "ref":
            ids = llm.tokenize(prompt_ids)
            decoded = llm.greedy(ids, second[0])
            click.echo(REFERENCE_PREFIX + json.dumps({"prompt_ids": ids, "ids": decoded.ids, "top2": decoded.top2}))
            return
        ids = parse_csv(prompt_ids)
        click.echo(f"PROMPT_IDS:{ids_csv(ids)}", err=True)
        if mode == "gen":
            click.echo(f"GEN_IDS:{ids_csv(llm.greedy(ids, second[0]).ids)}", err=True)
        else:
            match, total = llm.teacher_forced(ids, second)
            click.echo(f"TF_MATCH:{match}/{total}", err=True)

    try:
        child.main(args=argv, prog_name="python -m zincbench.engines.llama_cpp", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except ZincbenchError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(exc.exit_code))


if __name__ == "__main__":
    main()
