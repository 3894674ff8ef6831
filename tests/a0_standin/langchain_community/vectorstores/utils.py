"""`DistanceStrategy` enum of langchain_community."""

from __future__ import annotations

from enum import Enum


class DistanceStrategy(str, Enum):  # noqa: UP042 - as langchain defines it
    EUCLIDEAN_DISTANCE = "EUCLIDEAN_DISTANCE"
    MAX_INNER_PRODUCT = "MAX_INNER_PRODUCT"
    DOT_PRODUCT = "DOT_PRODUCT"
    JACCARD = "JACCARD"
    COSINE = "COSINE"
