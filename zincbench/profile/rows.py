"""The rows of a ``profile`` document (schema 1): one row type per table, each row tagged with the tool
that measured it and its table, so ``records.load`` gives one filterable DataFrame.

A table's optional columns (DRAM bytes where ncu measured them, nsys's CPU time of the ranges) are in
every row of that table or in none; a column the run did not have is ``ABSENT`` and left out of the JSON,
while a measured-but-missing value is null. So a recorded row survives ``from_json`` then ``to_json``
unchanged, key order included.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar


class _Absent:
    """The value of a column the table did not have (not null: null is a value the tool left out)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


@dataclass(kw_only=True)
class ProfileRow:
    tool: str  # nsys | ncu
    table: ClassVar[str]

    def to_json(self) -> dict:
        columns = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)[1:]}
        return {"tool": self.tool, "table": self.table, **{k: v for k, v in columns.items() if v is not ABSENT}}

    @staticmethod
    def from_json(obj: dict) -> ProfileRow:
        """A recorded row as the type its ``table`` names; an unknown table or key is a ValueError, a missing
        column a TypeError, naming it."""
        row_type = ROW_TYPES.get(obj.get("table"))
        if row_type is None:
            raise ValueError(f"profile row's table must be one of {', '.join(ROW_TYPES)}, got {obj.get('table')!r}")
        columns = {k: v for k, v in obj.items() if k != "table"}
        unknown = set(columns) - {f.name for f in dataclasses.fields(row_type)}
        if unknown:
            raise ValueError(f"profile {row_type.table} row has unknown key(s) {', '.join(sorted(unknown))}")
        return row_type(**columns)


@dataclass(kw_only=True)
class KernelRow(ProfileRow):
    table: ClassVar[str] = "kernel"
    name: str
    category: str
    calls: int
    total_ns: float
    mean_ns: float
    median_ns: float
    share: float
    dram_read_bytes: float | None | _Absent = ABSENT
    dram_write_bytes: float | None | _Absent = ABSENT


@dataclass(kw_only=True)
class RangeRow(ProfileRow):
    """GPU time per NVTX range; from nsys's stats, also the ranges' CPU wall time (instances, range_total_ns)."""

    table: ClassVar[str] = "range"
    range: str
    kernels: int | None | _Absent = ABSENT  # nsys stats with only nvtx_sum know no kernels per range
    calls: int | None | _Absent = ABSENT
    total_ns: float | None | _Absent = ABSENT
    share: float | None | _Absent = ABSENT
    dram_read_bytes: float | None | _Absent = ABSENT
    dram_write_bytes: float | None | _Absent = ABSENT
    instances: int | None | _Absent = ABSENT
    range_total_ns: float | None | _Absent = ABSENT


@dataclass(kw_only=True)
class CategoryRow(ProfileRow):
    table: ClassVar[str] = "category"
    category: str
    kernels: int
    calls: int
    total_ns: float
    share: float


@dataclass(kw_only=True)
class TrafficRow(ProfileRow):
    """ncu's DRAM bytes per invocation of a microbench range next to the family's traffic model."""

    table: ClassVar[str] = "traffic"
    range: str
    variant: str
    shape: str
    kernels: int
    launches: int
    invocations: int
    measured_bytes: float
    model_bytes: float
    measured_over_model: float | None


ROW_TYPES: dict[str, type[ProfileRow]] = {t.table: t for t in (CategoryRow, KernelRow, RangeRow, TrafficRow)}
