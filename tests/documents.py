"""Recorded results documents shaped like the real ones, for the gate and report tests."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from zincbench import records
from zincbench.bench import load_family
from zincbench.bench.base import CheckResult
from zincbench.bench.declared import declared_for
from zincbench.bench.rows import Floor, MicrobenchRow
from zincbench.bench.runner import compare_case
from zincbench.config import experiment_path
from zincbench.runs.validate import ModelOutcome, Status
from zincbench.testing.synthetic_rows import timed_row  # noqa: F401  (tests import it from here)


def all_variants(family: str) -> list:
    """A family's own variants and those its default experiment declares (the engine pack's)."""
    fam = load_family(family)
    path = experiment_path(fam.default_experiment)
    cfg = fam.load(path)
    return fam.variants(cfg) + declared_for(family, path, cfg).infos()


def failed_row(case: str, variant: str, *, family: str = "t2", role: str = "candidate") -> MicrobenchRow:
    """A row whose output failed the check (so it was not timed)."""
    return MicrobenchRow(
        family=family,
        case=case,
        params={},
        variant=variant,
        role=role,
        check=CheckResult(rel_error=1.0, fully_written=True, tolerance=1e-3),
        traffic={},
        detail={},
        reference={},
        floor=Floor(us=None, bound=None),
    )


def microbench_document(
    family: str = "t2",
    *,
    candidate_factor: float = 0.8,
    decision: str = "GO",
    device: str = "NVIDIA H200",
    n_cases: int | None = None,
    seed: int = 0,
    complete: bool = True,
) -> records.Document:
    """A microbench document shaped like the runner's: every variant timed, the candidate at
    ``candidate_factor`` x the baseline's time, other variants at 0.9x, compared with the baseline as the
    runner compares; ``decision`` is recorded."""
    fam = load_family(family)
    cfg = fam.load(experiment_path(fam.default_experiment))
    rule = fam.gate_rule(cfg)
    rng = np.random.default_rng(seed)
    rows = []
    for case in fam.cases(cfg)[:n_cases]:
        base_us = 50.0 + case.params["tokens"] / 8
        case_rows = {}
        for info in all_variants(family):
            factor = 1.0 if info.name == rule.baseline else candidate_factor if info.name == rule.candidate else 0.9
            row = timed_row(
                case.key,
                info.name,
                base_us * factor * (1 + 0.005 * rng.standard_normal(40)),
                family=family,
                params=case.params,
                role=info.role,
                tolerance=info.tolerance,
            )
            row.floor = Floor(us=base_us * 0.4, bound="memory")
            case_rows[info.name] = row
        compare_case(case_rows, rule)
        rows += case_rows.values()
    return records.Document(
        kind="microbench",
        config={"family": family, "settings": records.to_jsonable(cfg)},
        environment={"gpu": {"name": device}},
        results=rows,
        complete=complete,
        verdict={"decision": decision, "rule": asdict(rule), "cells": []},
    )


def validate_document(statuses: dict[str, str], exit_code: int, device: str = "NVIDIA H200") -> records.Document:
    rows = [
        ModelOutcome(
            model=name,
            gguf=f"/models/{name}.gguf",
            status=Status(status),
            mode="tolerant",
            n_gen=12,
            min_match=8,
            match=12 if status == "OK" else 3,
        ).to_json()
        for name, status in statuses.items()
    ]
    return records.Document(
        kind="validate",
        config={"mode": "tolerant", "allow_missing": False},
        environment={"gpu": {"name": device}},
        results=rows,
        verdict={"exit_code": exit_code},
    )


def reference_document(margins: list[float]) -> records.Document:
    return records.Document(
        kind="reference",
        config={
            "gguf": "/models/tiny.gguf",
            "identity": "header:abc",
            "prompt": "Hi",
            "n_gen": len(margins),
            "prompt_ids": [1, 2],
        },
        environment={"producer": {}},
        results=[
            {"position": i, "token": 7 + i, "top1_logit": 10.0, "top2_token": 3, "top2_logit": 10.0 - m, "margin": m}
            for i, m in enumerate(margins)
        ],
    )
