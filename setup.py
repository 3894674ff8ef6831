"""Build options that pyproject.toml cannot state: setuptools builds in a temporary folder.

``pip install .`` builds inside the source folder, and setuptools would leave ``build/`` and
``a0_reranker.egg-info/`` there: in the plugin folder itself (the repository root is the package).
Everything else about the package is in ``pyproject.toml``.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

SCRATCH = tempfile.mkdtemp(prefix="a0-reranker-build-")
atexit.register(shutil.rmtree, SCRATCH, True)


class BuildPy(build_py):
    """The package is the repository root: ship its modules, not this build script."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [module for module in modules if (module[0], module[1]) != ("a0_reranker", "setup")]


setup(
    cmdclass={"build_py": BuildPy},
    options={"build": {"build_base": f"{SCRATCH}/build"}, "egg_info": {"egg_base": SCRATCH}},
)
