"""The Qwen3-Reranker judge prompt, split for vLLM's ``/score`` as QwenLM's and vLLM's examples do.

vLLM joins the two texts of a pair with no separator for this model, so ``query_text + document_text``
is byte-for-byte the official Transformers prompt (QwenLM/Qwen3-Embedding README, "Transformers
Usage"; the model card carries the same code). User text is inserted by plain
concatenation, never through ``str.format``, so braces, ``%s`` and newlines in it stay as they are.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
SUFFIX: Final = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def query_text(query: str, instruction: str) -> str:
    """First half of the prompt (vLLM ``text_1``): system turn, instruction and query."""
    return PREFIX + "<Instruct>: " + instruction + "\n<Query>: " + query + "\n"


def document_text(document: str) -> str:
    """Second half of the prompt (vLLM ``text_2``): the document and the assistant turn to judge."""
    return "<Document>: " + document + SUFFIX


def full_prompt(query: str, document: str, instruction: str) -> str:
    """The official single-string prompt; equal to ``query_text(...) + document_text(...)``."""
    return query_text(query, instruction) + document_text(document)
