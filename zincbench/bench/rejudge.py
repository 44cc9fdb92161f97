"""Re-judge a recorded microbench document from its raw samples with today's judge: ``vs_baseline`` again
from every row's ``measurement.gpu_us``, then the gate rule over the cases the document measured."""

from __future__ import annotations

from dataclasses import dataclass

from zincbench import judge, records
from zincbench.bench.base import Case, GateRule
from zincbench.bench.rows import MicrobenchRow, check_schema
from zincbench.bench.runner import compare_case, decide_gate
from zincbench.errors import InputError


@dataclass
class Rejudged:
    decision: judge.GateDecision
    cells: list[dict]
    rule: GateRule  # today's, or the recorded one when the run never measured a variant today's names
    same_rule: bool  # judged by the rule the document was recorded under
    unmeasured: list[str]  # variants today's rule names that the run never measured


def rejudge_microbench(doc: dict, family, config, where: str) -> Rejudged:
    """``family``/``config``: the experiment today's rule comes from. Raises ValueError, TypeError or
    KeyError for a row of another shape; InputError (naming ``where``) for a recorded rule of another shape."""
    rule = family.gate_rule(config)
    check_schema(doc)
    # Rows the family could not run (skipped) have no check; neither has a row the judge cannot use.
    rows = [MicrobenchRow.from_json(row) for row in doc["results"] if "check" in row]
    recorded = doc.get("verdict") or {}
    unmeasured = sorted({rule.candidate, rule.baseline} - {row.variant for row in rows})
    if unmeasured and isinstance(recorded.get("rule"), dict):
        # Today's rule names a variant this run never measured (e.g. a new baseline): the samples can only
        # be judged by the rule they were recorded under.
        try:
            rule = GateRule(**recorded["rule"])
        except TypeError:
            raise InputError(f"{where}: verdict.rule is not a gate rule") from None
    by_case: dict[str, dict[str, MicrobenchRow]] = {}
    for row in rows:
        by_case.setdefault(row.case, {})[row.variant] = row
    for case_rows in by_case.values():
        compare_case(case_rows, rule)
    # The cases the document measured (a --gguf run has shapes the experiment YAML does not list).
    cases = [Case(key, next(iter(variants.values())).params) for key, variants in by_case.items()]
    decision, cells = decide_gate(family, config, cases, rows, rule)
    return Rejudged(decision, cells, rule, recorded.get("rule") == records.to_jsonable(rule), unmeasured)
