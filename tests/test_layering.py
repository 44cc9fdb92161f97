"""The package's layering, read from the source (ast, nothing imported): every ``import`` of a zincbench
module, at module level or inside a function, goes to the same layer or one below, and the imports
among zincbench modules have no cycle. Data flows measure -> records -> runs -> show; the CLI only
wires the layers below it.

The layer map, bottom to top (names under ``zincbench.``; ``zincbench`` alone is the package's
``__init__``). A module may import from its own layer and those below; the longest matching name
places it, so ``bench.rows`` sits in records although ``bench`` sits lower:

    foundations  zincbench errors config inputs resources outputs plugins catalog progress
    libraries    quant gpu judge change_points reference install
    measure      measure ops
    adapters     bench engines
    records      records reference_store bench.rows
    runs         runs bench.runner bench.rejudge profile report history testing
    show         show
    cli          cli __main__

Where a module sits apart from its package, and why:
- ``judge`` (statistics and verdict rules on samples; it imports only ``errors``) is a library below
  measure, not a step after records: measuring uses it too (the noise stopping rule's quantile
  interval, the ceilings' summary, the autotuner's paired comparison).
- ``change_points`` (where a history of medians and intervals steps) is judge's rule applied along a
  series, on plain numbers; ``history`` reads documents into series as ``report`` reads them.
- ``bench.rows`` (the microbench row type) is a record; ``bench.runner`` and ``bench.rejudge`` are a
  run and its re-judging: they live beside the families they fill and drive.
- ``measure.process`` (child processes with hard limits and ``EngineFailure``) and
  ``measure.llama_bench`` (llama-bench's rows, read or run live) sit below both the engine adapters
  and the profilers that use them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "zincbench"


def _layers_from_docstring() -> list[tuple[str, ...]]:
    """The map above, one tuple of module names per layer, bottom first (the docstring is the map)."""
    table = __doc__.split("those below;", 1)[1].split("\n\n", 2)[1]
    return [
        tuple("zincbench" if name == "zincbench" else f"zincbench.{name}" for name in line.split()[1:])
        for line in table.splitlines()
    ]


LAYERS = _layers_from_docstring()


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The zincbench modules ``name`` imports anywhere in its body (``from pkg import sub`` -> pkg.sub)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
    return {m for m in found if m in known and m != name}


def layer_of(name: str) -> int:
    # "zincbench" places the package's __init__ only: a module missing from the map fails, not lands at the bottom
    matches = [
        (len(prefix), i)
        for i, layer in enumerate(LAYERS)
        for prefix in layer
        if name == prefix or (prefix != "zincbench" and name.startswith(prefix + "."))
    ]
    if not matches:
        pytest.fail(f"{name} has no layer: add it to the layer map in {Path(__file__).name}'s docstring")
    return max(matches)[1]


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    known = modules()
    g = nx.DiGraph()
    g.add_nodes_from(known)
    for name, path in known.items():
        g.add_edges_from((name, target) for target in imports(name, path, set(known)))
    return g


def test_the_import_graph_is_read(graph):
    # The reader sees module-level and function-level imports alike (a guard against an empty graph).
    assert ("zincbench.cli.microbench", "zincbench.bench.runner") in graph.edges  # inside the command function
    assert (
        "zincbench.bench.runner",
        "zincbench.bench.autotune",
    ) in graph.edges  # `from zincbench.bench import autotune`


def test_no_import_cycles(graph):
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycle(s): " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles[:5])


def test_no_module_imports_from_a_layer_above(graph):
    layer = {name: layer_of(name) for name in graph}  # every module, importing or not, has its place
    upward = sorted((a, b) for a, b in graph.edges if layer[b] > layer[a])
    assert not upward, "imports from a layer above: " + "; ".join(f"{a} -> {b}" for a, b in upward)


def test_process_handling_is_neutral(graph):
    # Engines, llama-bench and the profilers all start their programs through it: it depends on none of them.
    assert set(graph.successors("zincbench.measure.process")) == set()
