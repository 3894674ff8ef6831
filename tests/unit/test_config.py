"""Settings model: defaults match default_config.yaml, coercion of form/env text, one clear error per bad key."""

from __future__ import annotations

import pytest

from usr.plugins.a0_reranker.a0_hooks.recall_entry import config_from_settings
from usr.plugins.a0_reranker.a0_hooks.settings_modal import load_default_settings
from usr.plugins.a0_reranker.core.config import QWEN3_DEFAULT_INSTRUCTION, RerankerConfig, settings_keys
from usr.plugins.a0_reranker.core.endpoint_url import normalize_endpoint
from usr.plugins.a0_reranker.core.errors import ConfigError


def test_yaml_defaults_equal_the_model_defaults() -> None:
    yaml_defaults = load_default_settings()
    assert list(yaml_defaults) == settings_keys()
    assert RerankerConfig.from_settings(yaml_defaults) == RerankerConfig()
    assert RerankerConfig().to_settings() == yaml_defaults


def test_a_recall_reads_settings_it_has_seen_without_validating_them_again() -> None:
    settings = {**load_default_settings(), "rerank_endpoint": "http://127.0.0.1:8000", "rerank_timeout": 3}
    config = config_from_settings(settings)
    assert config == RerankerConfig.from_settings(settings) and config.timeout == 3.0
    assert config_from_settings(dict(settings)) is config  # equal settings: the config already built
    assert config_from_settings({**settings, "rerank_timeout": 4}).timeout == 4.0  # a change is read at once
    assert config_from_settings({**settings, "other_plugin_key": object()}) is config  # only rerank_* keys count
    with pytest.raises(ConfigError, match="rerank_timeout"):
        config_from_settings({**settings, "rerank_timeout": "soon"})
    with pytest.raises(ConfigError, match="rerank_timeout"):  # a bad value is refused every time, never kept
        config_from_settings({**settings, "rerank_timeout": "soon"})
    odd = {**settings, "rerank_model": b"bytes"}  # not a JSON value: validated each time, not kept
    with pytest.raises(ConfigError, match="rerank_model"):
        config_from_settings(odd)


def test_seed_keys_keep_their_defaults() -> None:
    defaults = load_default_settings()
    assert defaults["rerank_enabled"] is True
    assert defaults["rerank_apply"] is True
    assert defaults["rerank_api"] == "auto"
    assert defaults["rerank_candidates"] == 20
    assert defaults["rerank_max_doc_chars"] == 8000
    assert defaults["rerank_instruction"] == QWEN3_DEFAULT_INSTRUCTION


def test_text_from_forms_and_env_is_coerced() -> None:
    config = RerankerConfig.from_settings(
        {"rerank_enabled": "false", "rerank_candidates": "12", "rerank_timeout": "2.5", "rerank_api": "QWEN3_SCORE",
         "rerank_max_concurrency": 8.0, "rerank_endpoint": " http://h:8002/ "}
    )
    assert config.enabled is False
    assert config.candidates == 12
    assert config.timeout == 2.5
    assert config.api == "qwen3_score"
    assert config.max_concurrency == 8
    assert config.endpoint == "http://h:8002"


def test_every_bad_key_is_named_in_one_error() -> None:
    with pytest.raises(ConfigError) as caught:
        RerankerConfig.from_settings(
            {"rerank_candidates": "many", "rerank_timeout": -1, "rerank_api": "magic", "rerank_endpoint": "ftp://x"}
        )
    # those that do not coerce and those that coerce but are out of range, in the settings' order
    assert [problem.partition(":")[0] for problem in caught.value.problems] == [
        "rerank_api", "rerank_endpoint", "rerank_candidates", "rerank_timeout"]
    with pytest.raises(ConfigError) as caught:
        RerankerConfig.from_settings({"rerank_timeout": -1, "rerank_endpoint": "ftp://x"})
    assert "rerank_timeout: must be between" in str(caught.value)
    assert "rerank_endpoint: the URL must start with http:// or https://" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [("http://", "has no host name"), ("http://u:p@h:1", "user name or password"), ("http://h:1?x=1", "?query")],
)
def test_endpoint_problems_are_explained_without_echoing_the_url(value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RerankerConfig(endpoint=value)
    assert problem in str(caught.value)
    assert "u:p" not in str(caught.value)


def test_booleans_are_not_numbers_and_numbers_not_booleans() -> None:
    with pytest.raises(ConfigError):
        RerankerConfig.from_settings({"rerank_candidates": True})
    with pytest.raises(ConfigError):
        RerankerConfig.from_settings({"rerank_enabled": "maybe"})


@pytest.mark.parametrize(
    ("pasted", "base"),
    [
        ("http://h:8002/v1/rerank", "http://h:8002"),
        ("http://h:8002/score/", "http://h:8002"),
        ("https://api.jina.ai/v1", "https://api.jina.ai"),
        ("http://h/prefix/rerank", "http://h/prefix"),
        ("http://h:7997", "http://h:7997"),
    ],
)
def test_a_pasted_api_path_is_trimmed(pasted: str, base: str) -> None:
    assert normalize_endpoint(pasted) == base


def test_the_api_key_stays_out_of_repr_and_errors() -> None:
    config = RerankerConfig(endpoint="http://h:1", api_key="sk-secret-123")
    assert "sk-secret-123" not in repr(config)
    assert config.key_fingerprint and "sk-secret" not in config.key_fingerprint
    assert RerankerConfig().key_fingerprint == ""


def test_unknown_keys_are_ignored_and_none_takes_the_default() -> None:
    config = RerankerConfig.from_settings({"other_plugin_key": 1, "rerank_model": None})
    assert config == RerankerConfig()
