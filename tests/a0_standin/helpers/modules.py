"""A0 `helpers/modules.py`: load Python files by path.

`import_module` names the module after the file stem and does NOT register it in `sys.modules`, so
every call runs the file's module-level code again.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from fnmatch import fnmatch
from types import ModuleType
from typing import TypeVar

from helpers.files import get_abs_path

T = TypeVar("T")


def import_module(file_path: str) -> ModuleType:
    abs_path = get_abs_path(file_path)
    module_name = os.path.basename(abs_path).replace(".py", "")
    spec = importlib.util.spec_from_file_location(module_name, abs_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"Could not load module from {abs_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pick_classes(module: ModuleType, base_class: type[T], one_per_file: bool) -> list[type[T]]:
    """Scan classes in reverse name order; the first subclass met wins, imported ones included."""
    found: list[type[T]] = []
    for _name, cls in reversed(inspect.getmembers(module, inspect.isclass)):
        if cls is not base_class and issubclass(cls, base_class):
            found.append(cls)
            if one_per_file:
                break
    return found


def load_classes_from_file(file: str, base_class: type[T], one_per_file: bool = True) -> list[type[T]]:
    return _pick_classes(import_module(file), base_class, one_per_file)


def load_classes_from_folder(
    folder: str, name_pattern: str, base_class: type[T], one_per_file: bool = True
) -> list[type[T]]:
    abs_folder = get_abs_path(folder)
    names = sorted(n for n in os.listdir(abs_folder) if fnmatch(n, name_pattern) and n.endswith(".py"))
    classes: list[type[T]] = []
    for name in names:
        classes.extend(load_classes_from_file(os.path.join(abs_folder, name), base_class, one_per_file))
    return classes


def purge_namespace(namespace: str) -> list[str]:
    """Remove `namespace` and everything below it from `sys.modules` (deepest first)."""
    doomed = [n for n in list(sys.modules) if n == namespace or n.startswith(namespace + ".")]
    doomed.sort(key=lambda n: n.count("."), reverse=True)
    for name in doomed:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return doomed
