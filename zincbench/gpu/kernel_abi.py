"""A kernel's launch ABI, read from the CUDA source it is compiled from: the one definition of a push struct.

The engine's kernels (and our copies in its ABI) take their device buffers first, then one struct passed
by value; some of ours take the same fields as scalar parameters. Either way ``cuLaunchKernel`` reads one
parameter buffer laid out like a C struct of the parameters: 8-byte pointers, then each field at its
natural alignment. Passing a struct's fields as separate kernel arguments is wrong (the driver copies
``sizeof(struct)`` bytes from the first field's address), so every struct launch packs the whole buffer.

The layout is never written down a second time: the field names, C types and order come from the
``struct`` definition and the ``extern "C" __global__`` signature in the source text, the same text the
compiler sees (ours or the engine's, ``--engine-src``). Launchers give values *by field name*; a missing
or unknown name is an error before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np

from zincbench.errors import InputError

# C spellings of the field types a push struct or scalar parameter may have -> our kind names
C_TYPES = {
    "unsigned": "u32",
    "unsigned int": "u32",
    "uint32_t": "u32",
    "uint": "u32",
    "int": "i32",
    "int32_t": "i32",
    "unsigned long long": "u64",
    "unsigned long long int": "u64",
    "uint64_t": "u64",
    "size_t": "u64",
    "long long": "i64",
    "long long int": "i64",
    "int64_t": "i64",
    "float": "f32",
}
KINDS = {
    "u32": np.dtype("<u4"),
    "i32": np.dtype("<i4"),
    "u64": np.dtype("<u8"),
    "i64": np.dtype("<i8"),
    "f32": np.dtype("<f4"),
}
POINTER_BYTES = 8
QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|__grid_constant__|struct)\b")
COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{([^{}]*)\}\s*;")
TYPEDEF_STRUCT = re.compile(r"\btypedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*(\w+)\s*;")
KERNEL = re.compile(
    r'extern\s+"C"\s+__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^()]*\)\s*)?'
    r"(?:void\s+)?(\w+)\s*\(([^()]*)\)"
)
DECLARATOR = re.compile(r"^(\w+)\s*(?:\[\s*(\d+)\s*\])?$")


class AbiError(InputError):
    """A kernel or struct that this module cannot lay out (not found, or a field type it does not know)."""


@dataclass(frozen=True)
class PushLayout:
    """The fields of one push struct (or of a kernel's scalar parameters), in declaration order."""

    name: str
    fields: tuple[tuple[str, str, int], ...]  # (field, kind, array length; 1 for a scalar)

    @property
    def dtype(self) -> np.dtype:
        """The C layout: natural alignment, size rounded up to the struct's alignment."""
        return np.dtype(
            {
                "names": [f for f, _, _ in self.fields],
                "formats": [KINDS[k] if n == 1 else (KINDS[k], (n,)) for _, k, n in self.fields],
            },
            align=True,
        )

    @property
    def alignment(self) -> int:
        return max((KINDS[k].itemsize for _, k, _ in self.fields), default=1)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f for f, _, _ in self.fields)

    def pack(self, values: Mapping[str, Any], where: str) -> bytes:
        """The struct's bytes from values given by field name (every field, no other name)."""
        missing = [f for f in self.names if f not in values]
        unknown = sorted(set(values) - set(self.names))
        if missing or unknown:
            said = "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unknown {', '.join(unknown)}" if unknown else "",
                )
                if part
            )
            raise AbiError(f"{where}: {self.name} has fields {', '.join(self.names)} ({said})")
        record = np.zeros((), self.dtype)
        for name, kind, length in self.fields:
            record[name] = _converted(values[name], kind, length, f"{where}.{name}")
        return record.tobytes()

    def unpack(self, data: bytes) -> dict:
        record = np.frombuffer(data[: self.dtype.itemsize], self.dtype)[0]
        return {f: record[f].tolist() for f in self.names}


def _converted(value, kind: str, length: int, where: str):
    """``value`` as a NumPy value of ``kind``, refused if it does not fit (no silent wrap or truncation)."""
    dtype = KINDS[kind]
    items = np.asarray(value, dtype=object).reshape(-1)
    if items.size != length:
        raise AbiError(f"{where}: expected {length} value(s), got {items.size}")
    out = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, float, np.integer, np.floating)):
            raise AbiError(f"{where}: {item!r} is not a number")
        if dtype.kind == "f":
            out.append(float(item))
            continue
        if isinstance(item, (float, np.floating)):
            if not float(item).is_integer():
                raise AbiError(f"{where}: {item!r} does not fit {kind} (not a whole number)")
            item = int(item)
        info = np.iinfo(dtype)
        if not info.min <= int(item) <= info.max:
            raise AbiError(f"{where}: {item!r} does not fit {kind} ({info.min}..{info.max})")
        out.append(int(item))
    return out[0] if length == 1 else out


@dataclass(frozen=True)
class KernelAbi:
    """An ``extern "C"`` kernel's parameters: device buffers, then one push struct or scalar fields."""

    entry: str
    buffers: tuple[str, ...]  # the pointer parameters' names, in order
    push: PushLayout  # the struct parameter's fields, or the scalar parameters as one layout
    by_value: bool  # True: one struct parameter (its size is sizeof, tail padding included)

    def parameters(self, pointers: Sequence[int], values: Mapping[str, Any], where: str) -> bytes:
        """The whole parameter buffer ``cuLaunchKernel`` reads: pointers, then the push fields."""
        if len(pointers) != len(self.buffers):
            raise AbiError(
                f"{where}: {self.entry} takes {len(self.buffers)} buffers "
                f"({', '.join(self.buffers) or 'none'}), got {len(pointers)}"
            )
        out = b"".join(int(p).to_bytes(POINTER_BYTES, "little") for p in pointers)
        if not self.push.fields:
            return out
        push = self.push.pack(values, where)
        if not self.by_value:  # scalar parameters end at the last one: no struct tail padding
            last = self.push.fields[-1][0]
            push = push[: self.push.dtype.fields[last][1] + self.push.dtype.fields[last][0].itemsize]
        return out + b"\0" * (-len(out) % self.push.alignment) + push

    def push_offset(self) -> int:
        """Where the push fields start in the parameter buffer."""
        end = POINTER_BYTES * len(self.buffers)
        return end + (-end % self.push.alignment)


@dataclass(frozen=True)
class SourceAbi:
    """Every push struct and ``extern "C"`` kernel signature of one CUDA source."""

    structs: dict  # name -> PushLayout, or a str saying why it cannot be one
    kernels: dict  # entry -> parameter list (str, as written)

    def struct(self, name: str) -> PushLayout:
        found = self.structs.get(name)
        if found is None:
            raise AbiError(f"no struct {name} in the source")
        if isinstance(found, str):
            raise AbiError(f"struct {name}: {found}")
        return found

    def kernel(self, entry: str) -> KernelAbi:
        if entry not in self.kernels:
            raise AbiError(f'no extern "C" __global__ {entry}(...) in the source')
        buffers, scalars, struct_param = [], [], None
        for i, param in enumerate(p for p in self.kernels[entry].split(",") if p.strip()):
            text = QUALIFIERS.sub(" ", param).strip()
            if "*" in text:
                if scalars or struct_param:
                    raise AbiError(f"{entry}: buffer parameter {param.strip()!r} after the push fields")
                buffers.append(text.rsplit("*", 1)[1].strip() or f"buffer{i}")
                continue
            words = text.split()
            if len(words) < 2:
                raise AbiError(f"{entry}: cannot read parameter {param.strip()!r}")
            c_type, name = " ".join(words[:-1]), words[-1]
            if c_type in C_TYPES:
                scalars.append((name, C_TYPES[c_type], 1))
            elif c_type in self.structs and struct_param is None and not scalars:
                struct_param = c_type
            else:
                raise AbiError(
                    f"{entry}: parameter {param.strip()!r} is neither a buffer, a push struct "
                    f"nor a scalar of {', '.join(sorted(set(C_TYPES.values())))}"
                )
        if struct_param and scalars:
            raise AbiError(f"{entry}: parameters after the push struct {struct_param}")
        if struct_param:
            return KernelAbi(entry, tuple(buffers), self.struct(struct_param), True)
        scalar_layout = _checked_fields(f"{entry} scalars", scalars) if scalars else PushLayout(f"{entry} scalars", ())
        if isinstance(scalar_layout, str):
            raise AbiError(f"{entry}: its scalar parameters: {scalar_layout}")
        return KernelAbi(entry, tuple(buffers), scalar_layout, False)


def _layout(name: str, body: str) -> PushLayout | str:
    fields = []
    for decl in (d.strip() for d in body.split(";")):
        if not decl:
            continue
        words = QUALIFIERS.sub(" ", decl).replace(",", " , ").split()
        # the type is the longest run of leading words that spells a known C type
        for cut in range(len(words), 0, -1):
            if " ".join(words[:cut]) in C_TYPES:
                break
        else:
            return f"field {decl!r} has a type other than {', '.join(sorted(C_TYPES))}"
        kind = C_TYPES[" ".join(words[:cut])]
        for declarator in " ".join(words[cut:]).split(","):
            match = DECLARATOR.match(declarator.replace(" ", ""))
            if not match:
                return f"cannot read the declarator {declarator.strip()!r} in {decl!r}"
            fields.append((match.group(1), kind, int(match.group(2) or 1)))
    return _checked_fields(name, fields)


def _checked_fields(name: str, fields: list) -> PushLayout | str:
    """A layout of these fields, or why there cannot be one (a push of no field, a name used twice)."""
    names = [f for f, _, _ in fields]
    twice = sorted({f for f in names if names.count(f) > 1})
    if twice:
        return f"field {twice[0]!r} is declared twice"
    if any(n < 1 for _, _, n in fields):
        return "a field has an array length of 0"
    return PushLayout(name, tuple(fields)) if fields else "it has no fields"


@lru_cache(maxsize=32)
def source_abi(text: str) -> SourceAbi:
    """The push structs and kernel signatures of a CUDA source (parsed once per distinct text)."""
    text = COMMENTS.sub(" ", text)
    structs = {m.group(1): _layout(m.group(1), m.group(2)) for m in STRUCT.finditer(text)}
    structs.update({m.group(2): _layout(m.group(2), m.group(1)) for m in TYPEDEF_STRUCT.finditer(text)})
    kernels = {m.group(1): " ".join(m.group(2).split()) for m in KERNEL.finditer(text)}
    return SourceAbi(structs, kernels)


def kernel_abi(text: str, entry: str, where: str = "") -> KernelAbi:
    try:
        return source_abi(text).kernel(entry)
    except AbiError as exc:
        raise AbiError(f"{where}: {exc}" if where else str(exc)) from None
