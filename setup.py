"""Package layout that pyproject.toml cannot express alone: the repository's top-level kernels/ and
experiments/ folders ship inside the package as zincbench.kernels and zincbench.experiments
(found at run time by zincbench.resources)."""

from setuptools import find_packages, setup

BUNDLED = {"zincbench.kernels": "kernels", "zincbench.experiments": "experiments"}

setup(
    packages=find_packages(include=["zincbench", "zincbench.*"]) + list(BUNDLED),
    package_dir=BUNDLED,
    package_data={"zincbench.kernels": ["**/*.cu", "**/*.cuh"], "zincbench.experiments": ["**/*.yaml"]},
)
