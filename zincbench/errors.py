"""Exit codes (a documented contract, see README) and the errors that map onto them."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # pass / GO
    FAIL = 1  # regression / NO-GO / validation failure
    USAGE = 2  # bad input or usage
    INCONCLUSIVE = 3  # the evidence does not decide
    ENVIRONMENT = 4  # no GPU, missing tool, broken installation, a file or folder the OS refuses
    INTERNAL = 5  # a bug in zincbench: an exception nobody anticipated (traceback saved to a log file)
    NOTHING_CHECKED = 6  # a gate whose every check was skipped: it checked nothing, so it says neither yes nor no
    BROKEN_PIPE = 141  # stdout closed by its reader (`| head`): 128 + SIGPIPE, as a shell reports it


class ZincbenchError(Exception):
    """An expected failure: the CLI prints its message on one line and exits with ``exit_code``."""

    exit_code: ExitCode = ExitCode.USAGE


class InputError(ZincbenchError):
    """Bad input: a missing or malformed file, an invalid option value, an unknown name."""

    exit_code = ExitCode.USAGE


class ConfigError(InputError):
    """A YAML file that does not match its schema."""


class EnvironmentProblem(ZincbenchError):
    """Something the machine lacks: a CUDA device, CuPy, a profiler, a compiler."""

    exit_code = ExitCode.ENVIRONMENT


class KernelCompileError(EnvironmentProblem):
    """NVRTC or nvcc rejected a kernel source; the message carries the compiler log."""


def worst(codes) -> ExitCode:
    """Combine exit codes of several checks: internal < environment < usage < fail < inconclusive <
    nothing checked < ok by severity.

    A failed check outranks an inconclusive one; broken input or environment outranks both because
    the run could not judge at all.
    """
    order = [
        ExitCode.INTERNAL,
        ExitCode.ENVIRONMENT,
        ExitCode.USAGE,
        ExitCode.FAIL,
        ExitCode.INCONCLUSIVE,
        ExitCode.NOTHING_CHECKED,
        ExitCode.OK,
    ]
    codes = [ExitCode(c) for c in codes]
    for code in order:
        if code in codes:
            return code
    return ExitCode.OK
