"""Package layout that pyproject.toml cannot express alone: the repository's top-level kernels/ and
experiments/ folders ship inside the package as zincbench.kernels and zincbench.experiments
(found at run time by zincbench.resources)."""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

BUNDLED = {"zincbench.kernels": "kernels", "zincbench.experiments": "experiments"}


class FreshBuildPy(build_py):
    """Build the package into an empty build/lib/zincbench: setuptools copies into that folder but never
    deletes from it, so a module since removed from the sources would ship from an old build/ folder."""

    def run(self):
        shutil.rmtree(Path(self.build_lib) / "zincbench", ignore_errors=True)
        super().run()


setup(
    packages=find_packages(include=["zincbench", "zincbench.*"]) + list(BUNDLED),
    package_dir=BUNDLED,
    package_data={"zincbench.kernels": ["**/*.cu", "**/*.cuh"], "zincbench.experiments": ["**/*.yaml"]},
    cmdclass={"build_py": FreshBuildPy},
)
