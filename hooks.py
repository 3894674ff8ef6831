"""Agent Zero lifecycle hooks. A0 loads this file by path (module ``hooks``) and calls these plain sync
functions: ``install`` after install and update, ``uninstall`` before deletion, ``pre_update`` before
``git pull``. The work is done in ``a0_hooks/lifecycle.py``.

A0 keeps this module loaded across an update (it calls ``pre_update``, pulls, then ``install`` from the
same cached copy), so each hook imports the lifecycle code when it runs: after ``pre_update`` has dropped
our modules, ``install`` runs the pulled code, not the code this file was loaded with.
"""

import importlib
from types import ModuleType

LIFECYCLE = "usr.plugins.a0_reranker.a0_hooks.lifecycle"


def _lifecycle() -> ModuleType:
    return importlib.import_module(LIFECYCLE)


def install() -> None:
    _lifecycle().install()


def uninstall() -> None:
    _lifecycle().uninstall()


def pre_update() -> None:
    _lifecycle().pre_update()
