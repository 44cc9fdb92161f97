"""A gate document as JUnit XML: one testsuite, one testcase per check.

PASS is a plain testcase, SKIPPED a ``<skipped>``, FAIL and INCONCLUSIVE a ``<failure>`` (its
``type`` says which: both fail CI, as the gate's exit code does), ERROR an ``<error>``. The message
is the check's one-line reason; the element's text adds its results file.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

ELEMENT_OF_STATUS = {"FAIL": "failure", "INCONCLUSIVE": "failure", "ERROR": "error", "SKIPPED": "skipped"}
# Characters XML 1.0 cannot carry at all (an engine's stderr tail may hold them): shown as U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(doc: dict) -> str:
    """The XML text (with declaration) for a gate document as written by ``zincbench.runs.gate``."""
    rows = doc.get("results") or []
    counts = {
        kind: sum(ELEMENT_OF_STATUS.get(r["status"]) == kind for r in rows) for kind in ("failure", "error", "skipped")
    }
    total_s = sum(r.get("wall_s") or 0.0 for r in rows)
    suites = ET.Element(
        "testsuites",
        name="zincbench gate",
        tests=str(len(rows)),
        failures=str(counts["failure"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        time=f"{total_s:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=str((doc.get("config") or {}).get("gates_file", "gate")),
        tests=str(len(rows)),
        failures=str(counts["failure"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        time=f"{total_s:.3f}",
        timestamp=str(doc.get("timestamp", "")),
    )
    for row in rows:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"zincbench.gate.{row['kind']}",
            name=xml_text(row["name"]),
            time=f"{row.get('wall_s') or 0.0:.3f}",
        )
        element = ELEMENT_OF_STATUS.get(row["status"])
        if element:
            child = ET.SubElement(case, element, message=xml_text(row["reason"]), type=row["status"])
            if element != "skipped":
                child.text = xml_text(
                    row["reason"] + (f"\nresults: {row['results_file']}" if row.get("results_file") else "")
                )
        elif row.get("results_file"):
            ET.SubElement(case, "system-out").text = xml_text(f"results: {row['results_file']}")
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
