r"""An engine declared in YAML: command templates plus the regexes that read its output.

Example (every section optional; an absent one means the engine cannot do that)::

    bin: /opt/engine/bin/dbg            # {bin}; --engine-bin overrides it
    env: {ENGINE_LOG: "1"}              # extra environment for every run
    max_prompt_ids: 256                 # refuse longer prompts (engines that truncate silently)
    generate:
      command: "{bin} gen {prompt_ids} {n_gen} {model}"
      ids_regex: 'GEN_IDS:(.*)'                      # group 1: comma-separated token ids
      prompt_ids_regex: 'PROMPT_IDS:(.*)'            # optional: the engine's echo must equal the prompt
    teacher_forced:
      command: "{bin} tf {prompt_ids} {ref_ids} {model}"
      match_regex: 'TF_MATCH:(\S+)/(\S+)'            # groups: matching positions, scored positions
    throughput:
      command: "{bin} -m {model} --prompt {prompt} -n {n_gen}"
      prefill_regex: 'Prefill complete: (\S+) tokens in \S+ ms \((\S+) tok/s\)'  # groups: tokens, tok/s
      decode_regex: 'Generated (\S+) tokens in \S+ ms . (\S+) tok/s'  # optional (absent line: no decode rate)

Placeholders: {bin}, {model}, {prompt_ids} and {ref_ids} (comma-separated ids), {n_gen}, {prompt}.
Templates are split like a shell line *before* substitution, so a prompt with spaces stays one
argument. Regexes search stdout and stderr together, one line at a time; the last match wins
(engines print progress lines first). The parse helpers here are shared by every line-oriented
adapter (zinc-dbg too).

A user regex must not hang zincbench: ``re`` cannot be interrupted, so its cost is bounded instead.
Matching runs per line on at most ``MAX_LINE_CHARS`` characters (a polynomial blow-up stays
bounded), and a regex with an unbounded quantifier inside another (``(a+)+``, ``(\S*\s)*``: the
exponential backtracking shape) is refused when the config is loaded.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
from pathlib import Path

try:  # the parser of the standard re module (private, stable since 3.0; renamed in 3.11)
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - python 3.10
    import sre_parse

from zincbench.config import build, load_yaml
from zincbench.engines.base import (
    GENERATE,
    TEACHER_FORCED,
    THROUGHPUT,
    Engine,
    GenerationResult,
    NotSupported,
    TeacherForcedResult,
    ThroughputResult,
    file_md5,
    register,
)
from zincbench.errors import EnvironmentProblem, InputError
from zincbench.measure.process import EngineFailure, checked, run_process

PLACEHOLDERS = ("bin", "model", "prompt_ids", "n_gen", "ref_ids", "prompt")
MAX_LINE_CHARS = 32768  # a GEN_IDS line of 4096 ids fits; longer lines are cut before matching
REGEX_KEYS = ("ids_regex", "prompt_ids_regex", "match_regex", "prefill_regex", "decode_regex")
_C = sre_parse  # opcodes: MAX_REPEAT, SUBPATTERN, ... (re._constants, re-exported by the parser)
_BACKTRACKING_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT)  # possessive repeats never backtrack


def _search_lines(pattern: str | re.Pattern, text: str) -> re.Match | None:
    """The last match of ``pattern`` within one (length-capped) line of ``text``."""
    compiled = re.compile(pattern)
    for line in reversed(text.splitlines()):
        matches = list(compiled.finditer(line[:MAX_LINE_CHARS]))
        if matches:
            return matches[-1]
    return None


def _last_match(pattern: str | re.Pattern, text: str, what: str) -> re.Match:
    match = _search_lines(pattern, text)
    if match is None:
        raise EngineFailure("garbage", f"no {what} in the engine output", _tail(text))
    return match


def _subpatterns(op, av) -> list:
    """The parsed sub-patterns an opcode contains (a repeat's body, a group, each branch...)."""
    if op in (*_BACKTRACKING_REPEATS, getattr(_C, "POSSESSIVE_REPEAT", None)):
        return [av[2]]
    if op is _C.SUBPATTERN:
        return [av[-1]]
    if op is _C.BRANCH:
        return list(av[1])
    if op in (_C.ASSERT, _C.ASSERT_NOT):
        return [av[1]]
    if op is getattr(_C, "ATOMIC_GROUP", None):
        return [av]
    if op is _C.GROUPREF_EXISTS:
        return [p for p in av[1:] if p is not None]
    return []


def _only_variable(body) -> bool:
    """Is every item of ``body`` of variable length (a+, b?, x{1,3}, or a group of such)? Then one
    string splits into its repetitions in exponentially many ways."""

    def variable(op, av) -> bool:
        if op in _BACKTRACKING_REPEATS:
            return av[0] != av[1]
        return op is _C.SUBPATTERN and _only_variable(av[-1])

    return len(body) > 0 and all(variable(op, av) for op, av in body)


def catastrophic_repeat(parsed) -> bool:
    """An unbounded backtracking repeat whose body is only variable-length items: (a+)+, (\\w+\\s?)*.

    A heuristic for the classic exponential shape, not a proof of safety: ambiguous alternations
    such as (a|aa)+ pass it, and the per-line cap is what bounds them.
    """
    for op, av in parsed:
        if op in _BACKTRACKING_REPEATS and av[1] == _C.MAXREPEAT and _only_variable(av[2]):
            return True
        if any(catastrophic_repeat(sub) for sub in _subpatterns(op, av)):
            return True
    return False


def check_regex(key: str, pattern: str) -> None:
    """ValueError naming ``key`` for a regex that does not compile or could backtrack exponentially."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{key}: invalid regex {pattern!r}: {exc}") from None
    if catastrophic_repeat(sre_parse.parse(pattern)):
        raise ValueError(
            f"{key}: regex {pattern!r} repeats a group of only variable-length parts (like (a+)+), "
            f"which can backtrack for hours on one line; anchor each repetition with a literal"
        )


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


_COUNT = re.compile(r"[0-9]+")  # ids and counts: ASCII digits only (Python's int() also takes "2_16", "+197", " ٣")
_REAL = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf)", re.I)


def _number(token: str, kind: type, what: str, text: str):
    """A non-negative integer of ASCII digits (``int``), or a decimal number (``float``); else garbage."""
    value = token.strip()
    if not (_COUNT if kind is int else _REAL).fullmatch(value):
        raise EngineFailure("garbage", f"malformed number {value!r} in {what}", _tail(text))
    return kind(value)


def parse_ids(text: str, pattern: str | re.Pattern, what: str) -> list[int]:
    """Comma-separated token ids from group 1 of the last match; missing/empty/malformed -> EngineFailure."""
    m = _last_match(pattern, text, what)
    fields = [f for f in m.group(1).strip().split(",")]
    if fields == [""]:
        raise EngineFailure("garbage", f"empty {what}", _tail(text))
    return [_number(f, int, what, text) for f in fields]


def parse_ratio(text: str, pattern: str | re.Pattern, what: str) -> tuple[int, int]:
    """(m, n) from groups 1 and 2 of the last match, with 0 <= m <= n."""
    m = _last_match(pattern, text, what)
    match, total = (_number(m.group(i), int, what, text) for i in (1, 2))
    if not 0 <= match <= total:
        raise EngineFailure("garbage", f"impossible {what} {match}/{total}", _tail(text))
    return match, total


def parse_rate(text: str, pattern: str | re.Pattern, what: str) -> tuple[int, float]:
    """(tokens, tokens/s) from groups 1 and 2 of the last match."""
    m = _last_match(pattern, text, what)
    return _number(m.group(1), int, what, text), _number(m.group(2), float, what, text)


def parse_throughput(text: str, prefill_regex: str, decode_regex: str | None = None) -> ThroughputResult:
    """Prefill rate (required) and decode rate (when the engine printed one: not for n_gen = 1)."""
    prefill_tokens, prefill_tps = parse_rate(text, prefill_regex, "prefill rate line")
    decode_tokens, decode_tps = (
        parse_rate(text, decode_regex, "decode rate line")
        if decode_regex and _search_lines(decode_regex, text)
        else (None, None)
    )
    return ThroughputResult(prefill_tokens, prefill_tps, decode_tokens, decode_tps)


def render_command(template: str, values: dict) -> list[str]:
    """argv from a template: shell-split first, then each word formatted (values never re-split)."""
    try:
        return [word.format(**values) for word in shlex.split(template)]
    except KeyError as exc:
        raise InputError(
            f"unknown placeholder {{{exc.args[0]}}} in engine command {template!r} "
            f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})"
        ) from None
    except (ValueError, IndexError) as exc:
        raise InputError(f"malformed engine command {template!r}: {exc}") from None


def ids_csv(ids) -> str:
    return ",".join(str(int(i)) for i in ids)


@dataclasses.dataclass
class GenerateSpec:
    command: str
    ids_regex: str
    prompt_ids_regex: str | None = None  # an echo of the prompt ids, checked against those sent


@dataclasses.dataclass
class TeacherForcedSpec:
    command: str
    match_regex: str


@dataclasses.dataclass
class ThroughputSpec:
    command: str
    prefill_regex: str
    decode_regex: str | None = None


@dataclasses.dataclass
class EngineSpec:
    bin: str | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    max_prompt_ids: int | None = None
    generate: GenerateSpec | None = None
    teacher_forced: TeacherForcedSpec | None = None
    throughput: ThroughputSpec | None = None

    def __post_init__(self):
        for section in (self.generate, self.teacher_forced, self.throughput):
            for key in REGEX_KEYS:
                pattern = getattr(section, key, None)
                if pattern is not None:
                    check_regex(key, pattern)


def load_engine_spec(path) -> EngineSpec:
    return build(EngineSpec, load_yaml(path), str(path))


@register("generic")
class GenericEngine(Engine):
    """Runs the commands of an ``EngineSpec``; ``config`` is its YAML file (or a spec object)."""

    capabilities = frozenset({GENERATE, TEACHER_FORCED, THROUGHPUT})  # those its YAML declares

    def __init__(self, config: str | Path | EngineSpec | None = None, bin: str | None = None):
        if config is None:
            raise InputError("the generic engine needs --engine-config FILE.yaml (command templates and regexes)")
        self.spec = config if isinstance(config, EngineSpec) else load_engine_spec(config)
        self.config_path = None if isinstance(config, EngineSpec) else str(config)
        self.bin = bin or self.spec.bin
        if self.bin and shutil.which(self.bin) is None:  # before any run, so no half-written results
            raise EnvironmentProblem(f"{self.kind} engine binary not found or not executable: {self.bin}")
        self.max_prompt_ids = self.spec.max_prompt_ids

    def program(self):
        return self.bin

    def describe(self) -> dict:
        binary = shutil.which(self.bin) if self.bin else None
        return {
            "kind": self.kind,
            "bin": self.bin,
            "md5": file_md5(binary) if binary else None,
            "config": self.config_path,
        }

    def _run(self, template: str, values: dict, env, timeout_s: float) -> str:
        if "{bin}" in template and not self.bin:
            raise InputError(f"{self.kind} engine: no binary given (--engine-bin)")
        argv = render_command(template, {"bin": self.bin, **values})
        result = checked(run_process(argv, env={**self.spec.env, **(env or {})}, timeout_s=timeout_s))
        return result.stdout + "\n" + result.stderr

    def check_prompt(self, prompt_ids) -> None:
        if self.max_prompt_ids is not None and len(prompt_ids) > self.max_prompt_ids:
            raise InputError(
                f"{self.kind} engine accepts at most {self.max_prompt_ids} prompt ids "
                f"(it would drop the rest silently); this prompt has {len(prompt_ids)}"
            )

    def generate(self, model, prompt_ids, n_gen, *, env=None, timeout_s=600.0) -> GenerationResult:
        if self.spec.generate is None:
            raise NotSupported(f"{self.kind} engine config has no generate section")
        self.check_prompt(prompt_ids)
        spec = self.spec.generate
        text = self._run(
            spec.command, {"model": model, "prompt_ids": ids_csv(prompt_ids), "n_gen": n_gen}, env, timeout_s
        )
        if spec.prompt_ids_regex and parse_ids(text, spec.prompt_ids_regex, "prompt ids echo") != list(prompt_ids):
            raise EngineFailure("garbage", "the engine echoed different prompt ids than it was given", _tail(text))
        return GenerationResult(list(prompt_ids), parse_ids(text, spec.ids_regex, "generated ids"))

    def teacher_forced(self, model, prompt_ids, reference_ids, *, env=None, timeout_s=600.0) -> TeacherForcedResult:
        if self.spec.teacher_forced is None:
            raise NotSupported(f"{self.kind} engine config has no teacher_forced section")
        self.check_prompt(prompt_ids)
        values = {
            "model": model,
            "prompt_ids": ids_csv(prompt_ids),
            "ref_ids": ids_csv(reference_ids),
            "n_gen": len(reference_ids),
        }
        text = self._run(self.spec.teacher_forced.command, values, env, timeout_s)
        return TeacherForcedResult(*parse_ratio(text, self.spec.teacher_forced.match_regex, "teacher-forced match"))

    def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0) -> ThroughputResult:
        spec = self.spec.throughput
        if spec is None:
            raise NotSupported(f"{self.kind} engine config has no throughput section")
        text = self._run(spec.command, {"model": model, "prompt": prompt_text, "n_gen": n_gen}, env, timeout_s)
        return parse_throughput(text, spec.prefill_regex, spec.decode_regex)
