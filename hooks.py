"""Agent Zero's lifecycle hooks, loaded by path and called sync (``a0_hooks/lifecycle.py`` does the work).
A0 keeps this module loaded across an update, so each hook imports the lifecycle code when it runs: after
``pre_update`` dropped our modules, ``install`` runs the pulled code."""

import importlib

LIFECYCLE = "usr.plugins.a0_reranker.a0_hooks.lifecycle"


def install() -> None:
    importlib.import_module(LIFECYCLE).install()


def uninstall() -> None:
    importlib.import_module(LIFECYCLE).uninstall()


def pre_update() -> None:
    importlib.import_module(LIFECYCLE).pre_update()
