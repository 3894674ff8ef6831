"""The embedded demo, so that ``a0-reranker demo`` runs with no setup: a tiny reference reranker server
(word overlap, Infinity's API), an embedding-like "before" order, and here the sample memories and
question. Nothing here is used by the plugin inside Agent Zero.

Asked "What changed in the March 1 upgrade?", a plain embedding search puts an unrelated connectivity
memory that shares "Agent Zero" and "March" on top, and the two memories about the upgrade fall
outside the five that Agent Zero keeps for the prompt.
"""

from __future__ import annotations

from typing import Final

QUERY: Final = "What changed in the March 1 upgrade?"
KEEP: Final = 5  # A0 keeps memory_recall_memories_max_result (5) memories for the prompt

MEMORIES: Final[tuple[str, ...]] = (
    "In March the router changed the IP of the Ollama host, and Agent Zero lost the connection to it.",
    "Release notes for Agent Zero v0.9.7, upgraded on March 1. Changes: settings moved to "
    "usr/settings.json, knowledge to usr/knowledge, plugins are enabled per project.",
    "The user likes answers in English, short summaries and links to the sources.",
    "Since upgrading on March 1, scheduled tasks use each project's own timezone instead of UTC.",
    "Backups of the memory folder run every night at 02:00 to the NAS; restore with the backup tool in the settings.",
    "The user changed the default chat model in the settings from GPT-4o to Claude.",
    "The user's birthday is March 14; remind them a day before.",
    "The system prompt was changed in the prompts folder to ask for step-by-step plans.",
    "Agent Zero runs in Docker: start it with docker compose up -d in the a0 folder.",
    "The search engine SearXNG runs on port 8888 inside the container.",
)
