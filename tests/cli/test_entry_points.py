"""The entry points themselves: ``python -m a0_reranker`` help and version; the demo's parts."""

from __future__ import annotations

from usr.plugins.a0_reranker import __version__
from usr.plugins.a0_reranker.core.detection import PROBE_IRRELEVANT, PROBE_QUERY, PROBE_RELEVANT
from usr.plugins.a0_reranker.core.scores import RAW, normalize
from usr.plugins.a0_reranker.demo import MEMORIES, QUERY, embedding_order, word_overlap_score


def test_help_lists_every_command(cli) -> None:
    result = cli("--help")
    assert result.returncode == 0
    for command in ("demo", "probe", "rerank"):
        assert command in result.stdout


def test_the_benchmarks_are_a_program_of_their_own(cli, bench_cli) -> None:
    """The benchmarks are developer tools: not a command of the installed CLI, a program of the checkout."""
    assert "bench" not in cli("--help").stdout
    assert cli("bench").returncode == 2
    result = bench_cli("--help")
    assert result.returncode == 0 and "--overload" in result.stdout and "--replicas" in result.stdout


def test_version(cli) -> None:
    result = cli("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"a0-reranker {__version__}")


def test_the_demo_scorer_passes_the_plugins_correctness_probe() -> None:
    """The embedded server must be detected as ranking correctly, like any real reranker."""
    scores = [word_overlap_score(PROBE_QUERY, d) for d in (*PROBE_RELEVANT, *PROBE_IRRELEVANT)]
    probabilities = normalize(scores, RAW)
    assert min(probabilities[: len(PROBE_RELEVANT)]) - max(probabilities[len(PROBE_RELEVANT):]) >= 0.5


def test_the_embedding_stand_in_puts_the_connectivity_memory_first() -> None:
    """The README's example ("What changed in the March 1 upgrade?"): plain embedding order tops the recall with an unrelated memory."""
    order = [MEMORIES[i] for i, _ in embedding_order(QUERY, MEMORIES)]
    assert "lost the connection" in order[0]
    assert order.index(next(m for m in MEMORIES if m.startswith("Release notes"))) >= 5
