"""Agent Zero lifecycle hooks. A0 loads this file by path (module ``hooks``) and calls these plain sync
functions: ``install`` after install and update, ``uninstall`` before deletion, ``pre_update`` before
``git pull``. The work is done in ``a0_hooks/lifecycle.py``."""

from usr.plugins.a0_reranker.a0_hooks import lifecycle


def install() -> None:
    lifecycle.install()


def uninstall() -> None:
    lifecycle.uninstall()


def pre_update() -> None:
    lifecycle.pre_update()
