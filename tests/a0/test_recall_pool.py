"""The reranked pool reaches below A0's threshold, A0 keeps deciding how many (issue 12, acceptance 1, 2
and 5), on both memory APIs of the stand-in: A0 v1.7's and the newer one (``embedding=``,
``delete_documents_by_query(include_exact=, cascade=)``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.core.detection import PROBE_QUERY
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, MEM_FILTER, memories_prompt, prio_scorer

pytestmark = pytest.mark.anyio

WORDS = [f"topic{i}" for i in range(10)]
MESSAGE = " ".join(WORDS)  # the recall query is this message (twice) plus A0's template words, all stopwords
A0_THRESHOLD = 0.7  # A0's default memory_recall_similarity_threshold
ABOVE = [0.85, 0.82, 0.79, 0.77, 0.74, 0.72]  # six memories pass A0's threshold ...
BELOW = [0.69, 0.68, 0.67, 0.66, 0.65, 0.64, 0.63, 0.62, 0.61, 0.6, 0.59, 0.58, 0.57, 0.56]  # ... fourteen do not


def relevance(a0: A0, query: str, text: str) -> float:
    """A0's similarity of ``text`` to ``query``: (1 + cosine) / 2 of the stand-in's embeddings."""
    embedder = a0.mod("models").HashEmbeddings()
    cosine = sum(a * b for a, b in zip(embedder.embed_query(query), embedder.embed_query(text), strict=True))
    return max(0.0, min(1.0, (1 + cosine) / 2))


def memory_near(a0: A0, target: float, name: str, prio: int) -> str:
    """A memory whose similarity to MESSAGE is as close to ``target`` as words allow: ``shared`` of the
    message's words, its ``prioNN`` mark for the reranker and ``own`` words of its own. Without hash
    collisions its cosine is shared / sqrt(10 * (shared + 1 + own)); the real one decides."""
    cosine = 2 * target - 1
    candidates = []
    for shared in range(1, len(WORDS) + 1):
        estimate = round(shared * shared / (len(WORDS) * cosine * cosine)) - shared - 1
        for own in range(max(0, estimate - 1), max(0, estimate + 2)):
            words = [*WORDS[:shared], f"prio{prio:02d}", *(f"{name}w{j}" for j in range(own))]
            candidates.append(" ".join(words))
    return min(candidates, key=lambda text: abs(relevance(a0, MESSAGE, text) - target))


async def seed(a0: A0, agent: Any, targets: list[float], prios: list[int]) -> list[str]:
    """Insert one memory per target similarity (best first), marked with its reranker priority."""
    memory = await a0.Memory.get(agent)
    texts = [memory_near(a0, target, f"m{i}", prio) for i, (target, prio) in enumerate(zip(targets, prios,
                                                                                               strict=True))]
    for text in texts:
        await memory.insert_text(text, {"area": "main"})
    return texts


async def recall(a0: A0, agent: Any) -> tuple[Any, list[dict[str, Any]]]:
    calls = await a0.store_calls(agent)
    agent.hist_add_user_message(MESSAGE)
    return await agent.run_message_loop(), calls


def recall_requests(server: RunningServer) -> list[Any]:
    """The rerank requests of recalls (not the detection probe's)."""
    return [r for r in server.requests if r.method == "POST" and r.json and r.json.get("query") != PROBE_QUERY]


@pytest.fixture
async def server(a0: A0) -> Any:
    srv = await start_server("infinity", scorer=prio_scorer)
    a0.configure(endpoint=srv.url)  # every other setting at its default
    yield srv
    await srv.close()


async def test_the_reranker_chooses_a0s_count_from_the_wider_pool(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    # The reranker's favourite is the memory the embedding likes least; then it follows the embedding.
    prios = [20 - rank for rank in range(len(ABOVE) + len(BELOW) - 1)] + [24]
    texts = await seed(a0, agent, ABOVE + BELOW, prios)
    loop_data, calls = await recall(a0, agent)
    query, asked = calls[0]["query"], [c["k"] for c in calls]
    similarity = [relevance(a0, query, text) for text in texts]
    assert similarity == sorted(similarity, reverse=True) and len(set(similarity)) == 20
    assert 0.55 <= min(similarity) < 0.57 and 0.84 < max(similarity) <= 0.86
    assert sum(s >= A0_THRESHOLD for s in similarity) == 6
    stock = await a0.original_search(agent, query=query, limit=12, threshold=A0_THRESHOLD, filter=MEM_FILTER)
    assert [d.page_content for d in stock] == texts[:6]

    assert asked == [12, 20, 8]  # A0's call, the pool, the (empty) solutions search
    [sent] = recall_requests(server)
    assert sent.json["documents"] == texts  # reranked over all 20
    chosen = [texts[-1], *texts[:5]]  # the reranker's best six: the one below 0.7 first
    assert loop_data.extras_persistent["memories"] == memories_prompt(agent, [_Doc(t) for t in chosen])
    [line] = a0.recall_lines(agent)
    assert line.startswith("Reranked recall: 20 candidates -> 6 returned") and "1 rescued" in line

    memory = await a0.Memory.get(agent)
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    found = await memory.search_similarity_threshold(query=query, limit=12, threshold=A0_THRESHOLD, filter=MEM_FILTER)
    assert [d.page_content for d in found] == chosen
    stored = memory.db.get_all_docs()
    assert all(d is stored[d.metadata["id"]] for d in found)
    pool = runtime.statistics().pool
    assert (pool.recalls, pool.mean_size, pool.starved_fraction, pool.rescued) == (2, 20, 0.0, 2)

    await server.close()  # the server goes down: exactly A0's own result, object for object
    fallback = await memory.search_similarity_threshold(query=query, limit=12, threshold=A0_THRESHOLD,
                                                        filter=MEM_FILTER)
    again = await a0.original_search(agent, query=query, limit=12, threshold=A0_THRESHOLD, filter=MEM_FILTER)
    assert len(fallback) == len(again) == 6 and all(a is b for a, b in zip(fallback, again, strict=True))
    assert "fell back to the stock order" in a0.recall_lines(agent)[-1]


async def test_nothing_above_a0s_threshold_returns_nothing_and_sends_nothing(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await seed(a0, agent, BELOW, list(range(len(BELOW))))
    loop_data, calls = await recall(a0, agent)
    assert "memories" not in loop_data.extras_persistent
    assert [c["k"] for c in calls] == [12, 8]  # no pool search either
    assert server.count() == 0 and a0.recall_lines(agent) == []
    assert runtime.statistics().pool.recalls == 0


async def test_the_floor_leaves_out_what_the_reranker_judged_irrelevant(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, min_score=0.7)  # prio_scorer: 0.5 + 0.02 * prio, so prio >= 10 passes
    agent = a0.new_agent()
    prios = [12, 3, 11, 2, 1, 0] + [13] + [0] * (len(BELOW) - 1)
    texts = await seed(a0, agent, ABOVE + BELOW, prios)
    loop_data, _ = await recall(a0, agent)
    kept = [texts[6], texts[0], texts[2]]  # six came back from A0, three scored below the floor
    assert loop_data.extras_persistent["memories"] == memories_prompt(agent, [_Doc(t) for t in kept])
    [line] = a0.recall_lines(agent)
    assert "-> 3 returned" in line and "3 below rerank_min_score dropped" in line
    assert runtime.statistics().pool.floor_dropped == 3


async def test_a_precomputed_embedding_reaches_every_store_search(a0: A0, server: RunningServer,
                                                                  memory_api: str) -> None:
    agent = a0.new_agent()
    await seed(a0, agent, ABOVE + BELOW, list(range(20)))
    memory = await a0.Memory.get(agent)
    vector = memory.db.embedding_function.embed_query(MESSAGE)
    call = {"query": MESSAGE, "limit": 4, "threshold": A0_THRESHOLD, "filter": MEM_FILTER, "embedding": vector}
    a0.ours("a0_hooks.recall_entry").begin(agent, "memory_load")
    if memory_api == "v1.7":  # no such parameter: the same TypeError as stock A0, and nothing else happens
        with pytest.raises(TypeError, match="embedding"):
            await memory.search_similarity_threshold(**call)
        assert server.count() == 0
        return
    embedded, by_vector = watch_store(memory.db)
    found = await memory.search_similarity_threshold(**call)
    assert embedded == []  # the store never embedded the query itself
    assert [(k, v is vector) for k, v in by_vector] == [(4, True), (20, True)]  # A0's call, then the pool
    assert [d.page_content for d in found] == [d.page_content for d in await recall_without_embedding(a0, agent)]


async def recall_without_embedding(a0: A0, agent: Any) -> list[Any]:
    memory = await a0.Memory.get(agent)
    return list(await memory.search_similarity_threshold(query=MESSAGE, limit=4, threshold=A0_THRESHOLD,
                                                         filter=MEM_FILTER))


def watch_store(store: Any) -> tuple[list[str], list[tuple[int, Any]]]:
    """Record the store's own query embeddings and its searches by vector (k, the vector)."""
    embedded: list[str] = []
    by_vector: list[tuple[int, Any]] = []
    embed, search = store.embedding_function.embed_query, store.asimilarity_search_with_score_by_vector

    def embedding(text: str) -> list[float]:
        embedded.append(text)
        return embed(text)

    async def searching(vector: Any, k: int = 4, **kwargs: Any) -> Any:
        by_vector.append((k, vector))
        return await search(vector, k, **kwargs)

    store.embedding_function.embed_query = embedding
    store.asimilarity_search_with_score_by_vector = searching
    return embedded, by_vector


async def test_deletion_stays_stock_with_the_newer_options_too(a0: A0, server: RunningServer, memory_api: str) -> None:
    options = {"include_exact": True, "cascade": True} if memory_api == "newer" else {}
    live, plain = a0.new_agent(project="live"), a0.new_agent(project="plain")
    results = []
    for agent in (live, plain):
        memory = await a0.Memory.get(agent)
        await seed(a0, agent, ABOVE[:3] + BELOW[:3], list(range(6)))
        parent = await memory.insert_text(f"notes on {MESSAGE}", {"area": "main"})  # holds the query verbatim
        await memory.insert_text("a child of the notes", {"area": "main", "parent_id": parent})
        a0.ours("a0_hooks.recall_entry").begin(agent, "recall")  # a scope left open by mistake ...
        a0.ours("a0_hooks.recall_entry").on_monologue_end(agent)  # ... is closed before memorize's deletion runs
        if agent is plain:
            a0.ours("a0_hooks.memory_patch").uninstall()  # stock A0 for the twin store
        removed = await memory.delete_documents_by_query(MESSAGE, 0.95, **options)
        remaining = sorted(d.page_content for d in memory.db.get_all_docs().values())
        results.append(([d.page_content for d in removed], remaining))
    assert results[0] == results[1]
    cascaded = ["a child of the notes"] if options else []  # cascade: a memory naming a deleted one goes too
    assert results[0][0] == [f"notes on {MESSAGE}", *cascaded]
    assert server.count() == 0


def on_pool_search(memory: Any, before: Callable[[str], Awaitable[None]]) -> None:
    """Run ``before(query)`` ahead of the store's search whenever the plugin's pool search asks (k = 20)."""
    original = memory.db.asearch

    async def widened(query: str, search_type: str, **kwargs: Any) -> Any:
        if kwargs.get("k") == 20:
            await before(query)
        return await original(query, search_type, **kwargs)

    memory.db.asearch = widened


async def search_as_recall(a0: A0, agent: Any, memory: Any) -> list[Any]:
    """The store search A0's recall makes for ``MESSAGE``, inside the recall scope."""
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    return list(await memory.search_similarity_threshold(query=MESSAGE, limit=12, threshold=A0_THRESHOLD,
                                                         filter=MEM_FILTER))


async def test_recall_with_a_pool_search_that_fails_keeps_a0s_answer(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    texts = await seed(a0, agent, ABOVE + BELOW, list(range(20)))
    memory = await a0.Memory.get(agent)

    async def failing(query: str) -> None:
        raise RuntimeError("the store broke on the second search")

    on_pool_search(memory, failing)
    found = await search_as_recall(a0, agent, memory)
    assert [d.page_content for d in found] == texts[:6]
    assert runtime.statistics().fallbacks["pool_search"] == 1 and server.count() == 0


class _Doc:
    """Only what ``memories_prompt`` reads."""

    def __init__(self, text: str) -> None:
        self.page_content = text
