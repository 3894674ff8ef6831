"""Each piece of shared state has one owner, checked on the source: each counter is written where what
it counts happens, the queued pairs changed by one class, the breaker admitted through one method, the deadline's
grace defined in one place, and (``OWNERS``) slots, a replica's load and speed, the retry budget, the
breaker's thresholds, the route cache and the registry each changed by the module that owns them."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.a0_layout import REPO_ROOT
from support.tree import files_under
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

PRODUCT_DIRS = ("a0_hooks", "api", "batching", "cli", "core", "demo", "extensions", "helpers", "process",
                "service", "tools")


def product_modules() -> Iterator[tuple[str, ast.Module]]:
    """The product's modules as git has them (not what a build or a tool left beside them)."""
    for folder in (*PRODUCT_DIRS, ""):
        for path in files_under(folder, ".py"):
            yield path.as_posix(), ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))


def called_methods(tree: ast.Module) -> set[str]:
    return {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}


# Who counts what: each counter is written where the thing it counts happens, by that code alone.
COUNTED_BY = {
    # a rerank's outcome, by the caller that returns it (refusals before it: by the recall path)
    "rerank_started": {"service/calls.py"},
    "reranked": {"service/calls.py"},
    "rerank_cancelled": {"service/calls.py"},
    "fell_back": {"service/calls.py", "a0_hooks/recall_search.py", "helpers/reranker.py"},
    # a request's events, by the dispatch step that makes requests (a request sent again: by the retries
    # it composes; the queue wait: by the batcher)
    **{event: {"batching/dispatch.py"} for event in ("on_request", "on_answer", "on_rate_limit_wait", "on_hedge")},
    **{event: {"batching/retries.py"} for event in ("on_retry", "on_failover", "on_budget_spent")},
    "on_queue_wait": {"batching/batcher.py"},
    # a recall's pool and its shadow comparison, by the recall path
    "pool": {"service/calls.py", "a0_hooks/recall_search.py"},
    "shadow": {"service/calls.py"},
}


def test_each_counter_is_written_where_what_it_counts_happens() -> None:
    """The transport's stale resends and the route book's detections are counted through the callbacks
    the service hands them (``on_stale_resend``, ``on_detection``), never called by name elsewhere."""
    writers = {name for name, member in inspect.getmembers(StatsRecorder, inspect.isfunction)
               if not name.startswith("_") and name not in ("snapshot", "reset")}
    assert writers == set(COUNTED_BY) | {"on_stale_resend", "on_detection"}
    calls = {module: called_methods(tree) for module, tree in product_modules() if module != "core/statistics.py"}
    for writer, expected in COUNTED_BY.items():
        assert {module for module, called in calls.items() if writer in called} == expected, writer
    for callback in ("on_stale_resend", "on_detection"):
        assert not {module for module, called in calls.items() if callback in called}, callback


def mutated_attributes(tree: ast.Module) -> set[str]:
    """Attributes assigned, deleted from, or changed in place (``x.a = ..``, ``del x.a[..]``, ``x.a.clear()``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "clear", "append", "extend", "remove", "pop", "insert"):
            targets = [node.func.value]
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute):
                found.add(target.attr)
    return found


def test_the_queued_pairs_are_changed_by_the_queue_alone() -> None:
    changing = {module for module, tree in product_modules() if "unsent" in mutated_attributes(tree)}
    assert changing == {"batching/queue.py"}
    tree = ast.parse((REPO_ROOT / "batching" / "queue.py").read_text(encoding="utf-8"))
    writers = {(cls.name, fn.name) for cls in tree.body if isinstance(cls, ast.ClassDef) for fn in cls.body
               if isinstance(fn, ast.FunctionDef) and "unsent" in mutated_attributes(ast.Module([fn], []))}
    # the job sets it up once; then the queue alone takes from it, forgets it, or drains it
    assert writers == {("Job", "__post_init__"), ("PendingQueue", "take"), ("PendingQueue", "discard"),
                       ("PendingQueue", "drain")}


def test_the_breaker_admits_through_attempt_alone() -> None:
    admitting = {module for module, tree in product_modules() if "admit" in called_methods(tree)}
    assert admitting == {"batching/breaker.py"}
    attempting = {module for module, tree in product_modules() if "attempt" in called_methods(tree)}
    assert attempting == {"batching/dispatch.py", "service/route_checks.py"}  # requests and detections


def test_the_deadline_has_one_grace_and_callers_never_count() -> None:
    for module, tree in product_modules():
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        defined = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign | ast.AnnAssign)
                   for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                   if isinstance(target, ast.Name)}
        assert "CountOnce" not in names, module
        graces = {name for name in defined if "GRACE" in name}
        assert not graces or module == "core/deadline.py", (module, graces)


def test_no_module_is_over_300_lines_and_no_function_over_40() -> None:
    for module, tree in product_modules():
        lines = len((REPO_ROOT / module).read_text(encoding="utf-8").splitlines())
        assert lines <= 300, (module, lines)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                assert length <= 40, (module, node.name, length)


def test_the_check_reads_the_whole_product() -> None:
    modules = {module for module, _ in product_modules()}
    assert {"service/runtime.py", "batching/breaker.py", "core/deadline.py", "hooks.py"} <= modules
    assert not any(Path(m).parts[0] == "tests" for m in modules)


def calls_on(tree: ast.Module, holder: str, methods: set[str]) -> set[str]:
    """Methods of ``methods`` called on an attribute or name ``holder`` (``x.holder.m()``, ``holder.m()``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods:
            target = node.func.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == holder:
                found.add(node.func.attr)
    return found


def assigned(tree: ast.Module) -> set[str]:
    """``a.b`` for every assignment to an attribute ``x.a.b`` or ``a.b``."""
    found = set()
    for node in ast.walk(tree):
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            if isinstance(target, ast.Attribute):
                owner = target.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                found.add(f"{name}.{target.attr}")
    return found


def writers(test: Callable[[ast.Module], bool]) -> set[str]:
    return {module for module, tree in product_modules() if test(tree)}


def endpoint_state_fields() -> set[str]:
    from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState
    return {f.name for f in dataclasses.fields(EndpointState)} - {"limiter", "breaker", "service"}


# Each piece of mutable state, how it is changed, and the one module that may change it (where a
# second is listed, it is the one that holds the first's handle and says so in its docstring).
OWNERS: dict[str, tuple[Callable[[ast.Module], bool], set[str]]] = {
    "slots: leases are kept by the limiter alone": (
        lambda t: "_leases" in mutated_attributes(t), {"batching/queue.py"}),
    "slots: taken by the dispatcher, leased by the replica set": (
        lambda t: bool(calls_on(t, "limiter", {"take", "acquire", "release"})),
        {"batching/batcher.py", "batching/dispatch.py"}),
    "a replica's load, speed and failures: its state alone (the dispatch step reports through it)": (
        lambda t: bool(mutated_attributes(t) & endpoint_state_fields()), {"batching/endpoint_state.py"}),
    "the retry budget: spent and refunded where requests are made (the dispatch step and its retries)": (
        lambda t: bool(calls_on(t, "budget", {"record_request", "try_spend", "refund"})),
        {"batching/dispatch.py", "batching/retries.py"}),
    "settings: never changed in place (new settings build new state; the old drains)": (
        lambda t: any(calls_on(t, holder, {"configure", "resize", "update"}) or f"{holder}.policy" in assigned(t)
                      for holder in ("breaker", "limiter", "budget", "replicas", "batcher", "dispatch")), set()),
    "the route cache: the route book alone": (
        lambda t: bool(calls_on(t, "_detect", {"cache_invalidate", "cache_clear", "cache_close"})),
        {"service/reranker_service.py"}),
    "endpoints and route groups: the registry alone": (
        lambda t: bool({"_groups", "_endpoints"} & mutated_attributes(t)), {"service/endpoints.py"}),
}


@pytest.mark.parametrize("state", list(OWNERS))
def test_each_piece_of_state_has_one_owner(state: str) -> None:
    test, owners = OWNERS[state]
    assert writers(test) == owners, state
