"""Fuzz tier (marker ``fuzz``): generated settings, any JSON value for each key (numbers of any size,
text of any kind, URLs that ``urlsplit`` cannot read, keys with control characters), through validation.

The property: a ``ConfigError`` whose every line names its key (and never repeats the API key), or a
valid config, and nothing else; a valid config validates again unchanged, and its endpoint is one the
plugin can use. Fixed seed (derandomized), no example database; ``SETTINGS_EXAMPLES`` of them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from usr.plugins.a0_reranker.core.config import NUMERIC_RANGES, RerankerConfig, settings_keys
from usr.plugins.a0_reranker.core.endpoint_url import endpoint_problem
from usr.plugins.a0_reranker.core.errors import ConfigError

pytestmark = pytest.mark.fuzz

SETTINGS_EXAMPLES: Final = 2000
FUZZ: Final = settings(derandomize=True, database=None, deadline=None, print_blob=True, max_examples=SETTINGS_EXAMPLES,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
KEY_MARK: Final = "sk-fuzzkey"  # in every generated API key, so an echo of one is recognisable

hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "[::1", "[127.0.0.1]", "ex℀ample.com", "bücher.de",
                         "exa mple", "h\nost", "user:pw@h", "", "::1", "[fe80::1%25eth0]", "\udcff", "a" * 300])
urls = st.builds(
    lambda scheme, host, port, path: f"{scheme}{host}{port}{path}",
    st.sampled_from(["http://", "https://", "ftp://", "", "//", "HTTP://", " http://", "javascript:"]),
    hosts | st.text(max_size=12),
    st.sampled_from(["", ":8000", ":0", ":99999", ":-1", ":abc", ":"]),
    st.sampled_from(["", "/", "/v1/rerank", "/v1/v1", "?q=1", "#x", "/%zz", " "]) | st.text(max_size=6),
)
special_texts = st.sampled_from([
    "", " ", "true", "False", "yes", "off", "1", "0", "-0", "1e400", "nan", "inf", "  7  ", "1.5", "10" * 200,
    "auto", "RERANK ", "qwen3_score", "cohere", "\x00", "\udcff", "a\nb", "key-\r\n-newline", "\x1b[2J",
])
scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=16) | special_texts | urls
           | st.sampled_from([10**400, -(10**400), 10**4000, 2**63, 1000, 1001]))
setting_values = scalars | st.lists(scalars, max_size=2) | st.dictionaries(st.text(max_size=3), scalars, max_size=2)
api_keys = st.builds(lambda a, b: f"{a}{KEY_MARK}{b}", st.text(max_size=3) | special_texts,
                     st.text(max_size=12) | special_texts)


def plausible(key: str) -> st.SearchStrategy[Any]:
    """Values near what the setting takes (at its limits, as text), so that many examples are valid."""
    name = key.removeprefix("rerank_")
    if name in NUMERIC_RANGES:
        low, high = NUMERIC_RANGES[name]
        near = st.sampled_from([low, high, low - 1, high + 1, (low + high) / 2]) | st.integers(int(low), int(high))
        return near | near.map(str) | near.map(float)
    if key in ("rerank_enabled", "rerank_apply", "rerank_tls_verify"):
        return st.booleans() | st.sampled_from(["true", "off", "1", 0, 2, "maybe"])
    return {"rerank_api": st.sampled_from(["auto", "rerank", "qwen3_score", " Rerank ", "cohere"]),
            "rerank_endpoint": urls, "rerank_api_key": api_keys}.get(key, st.text(max_size=20))


# Each example sets a few keys (as a saved config.json or a form delivers them): plausible values or any.
VALUES: Final = {key: plausible(key) | setting_values for key in [*settings_keys(), "rerank_unknown", "other"]}
settings_dicts = st.lists(st.sampled_from(sorted(VALUES)), max_size=6, unique=True).flatmap(
    lambda chosen: st.fixed_dictionaries({key: VALUES[key] for key in chosen}))


def assert_valid(config: RerankerConfig) -> None:
    assert RerankerConfig(**dataclasses.asdict(config)) == config  # validates again, unchanged
    assert endpoint_problem(config.endpoint) is None
    for name, (low, high) in NUMERIC_RANGES.items():
        value = getattr(config, name)
        assert isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        assert low <= value <= high
    assert isinstance(config.api_key, str) and config.api_key == config.api_key.strip()


def assert_names_its_keys(error: ConfigError, given_settings: dict[str, Any]) -> None:
    known = {*settings_keys(), "settings"}
    assert error.problems
    for problem in error.problems:
        assert problem.split(": ", 1)[0] in known, problem
        assert len(problem) < 400, problem
    key = given_settings.get("rerank_api_key")
    if isinstance(key, str) and KEY_MARK in key:
        assert KEY_MARK not in f"{error} {error!r}"


@FUZZ
@given(generated=settings_dicts)
@example(generated={"rerank_endpoint": "http://127.0.0.1:8000/v1/rerank/v1"})  # normalized once, not again
@example(generated={"rerank_timeout": 10**400, "rerank_api_key": f"{KEY_MARK}\n"})
def test_any_settings_are_a_valid_config_or_a_config_error_naming_keys(generated: dict[str, Any]) -> None:
    try:
        config = RerankerConfig.from_settings(generated)
    except ConfigError as error:
        event("config error")
        assert_names_its_keys(error, generated)
    else:
        event("valid")
        assert_valid(config)


@settings(FUZZ, max_examples=500)
@given(url=urls | st.text())
def test_endpoint_validation_never_raises(url: str) -> None:
    problem = endpoint_problem(url)
    assert problem is None or (isinstance(problem, str) and "pw@" not in problem)
    event("refused" if problem else "accepted")
