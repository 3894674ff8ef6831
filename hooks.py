"""Agent Zero lifecycle hooks. A0 loads this file by path (module ``hooks``) and calls these plain sync
functions: ``install`` after install and update, ``uninstall`` before deletion, ``pre_update`` before
``git pull``; ``a0_hooks/lifecycle.py`` does the work. A0 keeps this module loaded across an update, so
each hook imports the lifecycle code when it runs: after ``pre_update`` has dropped our modules,
``install`` runs the pulled code, not the code this file was loaded with.
"""

import importlib

LIFECYCLE = "usr.plugins.a0_reranker.a0_hooks.lifecycle"


def install() -> None:
    importlib.import_module(LIFECYCLE).install()


def uninstall() -> None:
    importlib.import_module(LIFECYCLE).uninstall()


def pre_update() -> None:
    importlib.import_module(LIFECYCLE).pre_update()
