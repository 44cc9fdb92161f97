"""nsys SQLite reader on small hand-built exports.

The databases here are written by ``make_export`` with the table and column names of the nsys export
schema (shared/reference/profiling.md §1.4, as verified on a 2025.3.x export); the values are made up
so that each attribution rule has a case that tells right from wrong. Real exports are tested in
test_profile_real_fixtures.py.
"""

import sqlite3

import pytest

from zincbench.errors import InputError
from zincbench.profile.categories import load_rules
from zincbench.profile.nsys import read_sqlite
from zincbench.profile.parse import NO_RANGE, parse_file

PID, OTHER_PID = 100, 200


def gtid(pid: int, tid: int) -> int:
    return (pid << 24) | tid  # <HW:8><VM:8><PID:24><TID:24>


MAIN, WORKER = gtid(PID, PID), gtid(PID, PID + 1)
STRINGS = {
    1: "kernA(float *, int)",
    2: "void tmpl<float, (int)4>(const float *, int)",
    3: "outer",
    4: "cudaLaunchKernel_v7000",
    5: "kernB",
}
PUSHPOP, STARTEND, DOMAIN_CREATE = 59, 60, 75


def make_export(path, *, kernels=True, runtime=True, text_id_column=True, pushpop_id=PUSHPOP, enum_rows=None):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", STRINGS.items())
    con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
    con.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.20.3')")
    text_id = ", textId INTEGER" if text_id_column else ""
    con.execute(
        "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, "
        "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "
        f"domainId INTEGER{text_id})"
    )
    ranges = [  # start, end, type, text, textId, tid, domain
        (0, 1000, pushpop_id, None, 3, MAIN, 0),  # registered string: name only via StringIds
        (100, 400, pushpop_id, "inner", None, MAIN, 0),  # plain string in text
        (500, 700, STARTEND, "se_range", None, MAIN, 0),
        (800, 900, pushpop_id, "dom_range", None, MAIN, 1),
        (0, 1000, pushpop_id, "worker_range", None, WORKER, 0),
        (1200, 1205, pushpop_id, "too_short", None, MAIN, 0),  # ends before the API call it overlaps
    ]
    for start, end, etype, text, tid_, thread, domain in ranges:
        if not text_id_column and text is None:
            text = STRINGS[tid_]
        cols = "start, end, eventType, text, globalTid, domainId" + (", textId" if text_id_column else "")
        values = (start, end, etype, text, thread, domain) + ((tid_,) if text_id_column else ())
        con.execute(f"INSERT INTO NVTX_EVENTS ({cols}) VALUES ({', '.join('?' * len(values))})", values)
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0, ?, 'mydomain', ?, 1)",
        (DOMAIN_CREATE, MAIN),
    )
    if enum_rows:
        con.execute("CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER, name TEXT, label TEXT)")
        con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, '')", enum_rows)
    if runtime:
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, "
            "globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER)"
        )
        calls = [  # start, end, tid, correlationId
            (150, 160, MAIN, 1),  # inner (inside outer too): innermost is inner
            (450, 460, MAIN, 2),  # outer only
            (550, 560, MAIN, 3),  # se_range, inside outer: the later-starting range wins
            (850, 860, MAIN, 4),  # mydomain:dom_range
            (1100, 1110, MAIN, 5),  # no range
            (150, 160, WORKER, 6),  # same time as call 1 on another thread: worker_range
            (1203, 1210, MAIN, 8),  # starts inside too_short but ends after it: no range
            (150, 160, gtid(OTHER_PID, OTHER_PID), 7),  # correlation id 7 of another process
            (450, 460, MAIN, 7),  # correlation id 7 of our process: outer
        ]
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId) "
            "VALUES (?, ?, ?, ?, 4)",
            calls,
        )
    if kernels:
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
            "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, "
            "shortName INTEGER, gridX INTEGER)"
        )
        launches = [  # start, end, correlationId, name id
            (2000, 2100, 1, 1),
            (2100, 2300, 2, 1),
            (2300, 2330, 3, 2),
            (2400, 2440, 4, 5),
            (2500, 2510, 5, 5),
            (2600, 2650, 6, 5),
            (2700, 2720, 7, 2),
            (2800, 2805, 8, 5),
        ]
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId, globalPid, demangledName, "
            "shortName) VALUES (?, ?, ?, ?, ?, ?)",
            [(s, e, c, PID << 24, n, n) for s, e, c, n in launches],
        )
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, correlationId INTEGER, "
            "globalPid INTEGER, bytes INTEGER, copyKind INTEGER)"
        )
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (3000, 3400, 2, ?, 4096, 1)", (PID << 24,))
        con.execute("CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER, name TEXT, label TEXT)")
        con.execute("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_OPER_HTOD', 'Host-to-Device')")
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, correlationId INTEGER, "
            "globalPid INTEGER, bytes INTEGER, value INTEGER)"
        )
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (3500, 3520, 5, ?, 4096, 0)", (PID << 24,))
    con.commit()
    con.close()
    return path


def ranges_by_start(path):
    launches, _, _ = read_sqlite(path)
    return {
        start: name if isinstance(name, str) else None for start, name in zip(launches["start_ns"], launches["range"])
    }


EXPECTED_RANGES = {
    2000: "inner",
    2100: "outer",
    2300: "se_range",
    2400: "mydomain:dom_range",
    2500: None,
    2600: "worker_range",
    2700: "outer",
    2800: None,
    3000: "outer",
    3500: None,
}


def test_innermost_enclosing_range_per_launch(tmp_path):
    assert ranges_by_start(make_export(tmp_path / "x.sqlite")) == EXPECTED_RANGES


def test_names_without_textid_column(tmp_path):
    # Older exports have no textId: names come from text alone.
    assert ranges_by_start(make_export(tmp_path / "x.sqlite", text_id_column=False)) == EXPECTED_RANGES


def test_event_type_ids_come_from_the_export_enum(tmp_path):
    path = make_export(
        tmp_path / "x.sqlite",
        pushpop_id=159,
        enum_rows=[(159, "NvtxPushPopRange"), (60, "NvtxStartEndRange"), (75, "NvtxDomainCreate")],
    )
    assert ranges_by_start(path) == EXPECTED_RANGES


def test_tables_from_an_export(tmp_path):
    tables = parse_file(make_export(tmp_path / "x.sqlite"), load_rules())
    kernels = tables.kernels.set_index("name")
    assert kernels.loc["kernA(float *, int)", "calls"] == 2
    assert kernels.loc["kernA(float *, int)", "total_ns"] == 300
    assert kernels.loc["kernA(float *, int)", "median_ns"] == 150
    assert kernels.loc["void tmpl<float, (int)4>(const float *, int)", "calls"] == 2  # one per process-matched call
    assert kernels.loc["[CUDA memcpy Host-to-Device]", "total_ns"] == 400
    assert kernels.loc["[CUDA memset]", "category"] == "memcpy/memset"
    assert tables.kernels["share"].sum() == pytest.approx(1.0)
    assert tables.kernels["total_ns"].sum() == 100 + 200 + 30 + 40 + 10 + 50 + 20 + 5 + 400 + 20
    ranges = tables.ranges.set_index("range")
    assert ranges.loc["outer", "calls"] == 3 and ranges.loc["outer", "total_ns"] == 200 + 20 + 400
    assert ranges.loc[NO_RANGE, "calls"] == 3
    assert tables.ranges["share"].sum() == pytest.approx(1.0)
    assert tables.categories["total_ns"].sum() == tables.kernels["total_ns"].sum()
    assert tables.metadata["EXPORT_SCHEMA_VERSION"] == "3.20.3"


def test_without_runtime_table_nothing_is_attributed(tmp_path):
    launches, _, notes = read_sqlite(make_export(tmp_path / "x.sqlite", runtime=False))
    assert len(launches) == 10 and launches["range"].isna().all()
    assert any("no launching API call" in n for n in notes)


def test_export_without_kernels_gives_empty_tables(tmp_path):
    tables = parse_file(make_export(tmp_path / "x.sqlite", kernels=False), load_rules())
    assert tables.kernels.empty and tables.ranges.empty and tables.categories.empty
    assert any("does not contain CUDA kernel data" in n for n in tables.notes)


def test_an_sqlite_file_that_is_not_an_nsys_export(tmp_path):
    path = tmp_path / "other.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(InputError, match="not an nsys SQLite export"):
        parse_file(path, load_rules())
