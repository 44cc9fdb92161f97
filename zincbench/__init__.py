"""zincbench: benchmark and gating harness for GPU inference kernels.

Data flows one way: measure (kernels, timer, engine runs) -> records (typed results + metadata)
-> judge (statistics, verdicts) -> show (tables, markdown, JSON, plots). The CLI in
``zincbench.cli`` is a thin layer over this library.
"""

__version__ = "0.1.0"
