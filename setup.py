"""What pyproject.toml cannot state: ``pip install .`` builds in the plugin folder (the repository root is
the package), so setuptools' ``build/`` and ``egg-info`` go to a temporary one."""

from __future__ import annotations

import atexit
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

SCRATCH = tempfile.mkdtemp(prefix="a0-reranker-build-")
atexit.register(shutil.rmtree, SCRATCH, True)


class BuildPy(build_py):
    """Ship the root package's modules, not this build script."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [module for module in modules if (module[0], module[1]) != ("a0_reranker", "setup")]


setup(cmdclass={"build_py": BuildPy},
      options={"build": {"build_base": f"{SCRATCH}/build"}, "egg_info": {"egg_base": SCRATCH}})
