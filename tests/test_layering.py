"""The package's layering, read from the source (ast, nothing imported): every ``import`` of a zincbench
module, at module level or inside a function, goes to the same layer or one below, and the imports
among zincbench modules have no cycle. Data flows measure -> records -> judge -> show; the CLI only
wires the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "zincbench"

# Bottom to top; a module may import from its own layer and those below. The first matching prefix
# (longest first) places a module.
LAYERS = [
    # foundations: the package's version, errors, YAML/config, input files, bundled resources, outputs, plugins
    ("zincbench", "zincbench.__init__", "zincbench.errors", "zincbench.config", "zincbench.inputs",
     "zincbench.resources", "zincbench.outputs", "zincbench.plugins", "zincbench.catalog"),
    # libraries on plain numbers and devices. judge is the statistics and verdict rules on samples (it
    # imports nothing above errors): measuring uses them too (the noise stopping rule's quantile
    # interval, the ceilings' summary, the autotuner's paired comparison).
    # install: what an optional part (CuPy and a GPU, an extra) needs and how to get it, beside gpu
    # change_points: where a history of medians and intervals steps (judge's rule applied along a series)
    ("zincbench.quant", "zincbench.gpu", "zincbench.judge", "zincbench.change_points", "zincbench.reference",
     "zincbench.install"),
    ("zincbench.measure", "zincbench.ops"),
    # families and engine adapters; llamabench reads and runs llama-bench through engines.process
    ("zincbench.bench", "zincbench.engines", "zincbench.llamabench"),
    # records: documents, and the microbench row type that lives beside the families that fill it
    ("zincbench.records", "zincbench.reference_store", "zincbench.bench.rows"),
    # run plans: microbench's runner (and its re-judging of recorded runs) lives beside the families it
    # drives, but it is a run like runs.ab
    # history reads documents as report does, into series across commits
    ("zincbench.runs", "zincbench.bench.runner", "zincbench.bench.rejudge", "zincbench.profile", "zincbench.report",
     "zincbench.history", "zincbench.testing"),
    ("zincbench.show",),
    ("zincbench.cli", "zincbench.__main__"),
]

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
    matches = [(len(prefix), i) for i, layer in enumerate(LAYERS) for prefix in layer
               if name == prefix or name.startswith(prefix + ".")]
    if not matches:
        pytest.fail(f"{name} has no layer: add it to LAYERS in {Path(__file__).name}")
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
    assert ("zincbench.bench.runner", "zincbench.bench.autotune") in graph.edges  # `from zincbench.bench import autotune`


def test_no_import_cycles(graph):
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycle(s): " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles[:5])


def test_no_module_imports_from_a_layer_above(graph):
    upward = sorted((a, b) for a, b in graph.edges if layer_of(b) > layer_of(a))
    assert not upward, "imports from a layer above: " + "; ".join(f"{a} -> {b}" for a, b in upward)
