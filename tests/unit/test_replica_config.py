"""``rerank_endpoint`` as one URL or several replicas (issue: replicas, acceptance 1): a comma list, a
whitespace list, a YAML or JSON list; the bad entry named (by position, never by its text); an old
single-URL setting works exactly as before."""

from __future__ import annotations

import json

import pytest
import yaml

from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.errors import ConfigError

A, B, C = "http://gpu-a:8002", "http://gpu-b:8002", "https://gpu-c.example"


@pytest.mark.parametrize("setting", [
    f"{A}, {B},{C}",
    f"{A} {B}\n{C}",
    f"  {A}/v1/rerank ,\t{B}/ {C}/score  ",
    [A, B, C],
    (A, f"{B}/", f"{C}/v1"),
])
def test_several_urls_in_any_form_are_the_same_replicas(setting: object) -> None:
    config = RerankerConfig.from_settings({"rerank_endpoint": setting})
    assert config.endpoints == (A, B, C)
    assert config.endpoint == f"{A}, {B}, {C}"  # one canonical text, saved back as it is
    assert RerankerConfig.from_settings(config.to_settings()) == config


def test_a_yaml_list_and_a_json_list_load_as_replicas() -> None:
    from_yaml = yaml.safe_load(f"rerank_endpoint:\n  - {A}\n  - {B}\n")
    from_json = json.loads(json.dumps({"rerank_endpoint": [A, B]}))
    assert RerankerConfig.from_settings(from_yaml).endpoints == (A, B)
    assert RerankerConfig.from_settings(from_json).endpoints == (A, B)


def test_one_url_is_exactly_as_before() -> None:
    config = RerankerConfig.from_settings({"rerank_endpoint": "http://host:8002/v1/rerank"})
    assert config.endpoint == "http://host:8002" and config.endpoints == ("http://host:8002",)
    assert config.replicas == {"http://host:8002": config} and config.replicas["http://host:8002"] is config
    assert not config.hedging  # auto hedging is off with one endpoint


def test_a_configs_replicas_cannot_be_changed_by_a_caller() -> None:
    """Configs are cached and shared by every recall with the same settings: a caller that wrote into
    ``replicas`` would change them for all of them."""
    config = RerankerConfig.from_settings({"rerank_endpoint": f"{A}, {B}"})
    with pytest.raises(TypeError):
        config.replicas[A] = RerankerConfig(endpoint="http://elsewhere:1")  # type: ignore[index]
    assert config.replicas[A].endpoint == A and config.replicas[B].endpoint == B


def test_the_same_url_twice_counts_once_and_hedging_turns_on_with_two() -> None:
    config = RerankerConfig(endpoint=f"{A}, {A}/, {B}")
    assert config.endpoints == (A, B)
    assert config.hedging and not config.replace(hedge="off").hedging
    assert RerankerConfig(endpoint=A, hedge="on").hedging


@pytest.mark.parametrize(("setting", "server"), [
    ("HTTP://gpu-a:8002, http://gpu-a:8002", "http://gpu-a:8002"),
    ("http://GPU-A:8002 http://gpu-a:8002/v1/rerank", "http://gpu-a:8002"),
    ("http://Host:80, http://host", "http://host"),
    ("https://host:443/v1, HTTPS://HOST", "https://host"),
    ("http://[::1]:80\nhttp://[::1]", "http://[::1]"),
    (["hTTp://Gpu-A:8002", "http://gpu-a:8002"], "http://gpu-a:8002"),
])
def test_one_server_in_another_letter_case_or_with_its_default_port_is_one_replica(setting: object,
                                                                                    server: str) -> None:
    config = RerankerConfig.from_settings({"rerank_endpoint": setting})
    assert config.endpoints == (server,) and config.endpoint == server
    assert not config.hedging  # auto hedging stays off: it is one server
    assert RerankerConfig.from_settings(config.to_settings()) == config


def test_paths_keep_their_case_and_other_ports_are_other_servers() -> None:
    urls = ("http://host/Tenant", "http://host/tenant", "http://host:8080", "https://host:80", "http://host:443")
    config = RerankerConfig(endpoint=", ".join(urls))
    assert config.endpoints == urls and config.hedging


@pytest.mark.parametrize(("setting", "named"), [
    (f"{A}, ftp://gpu-b", "entry 2 of 2 must start with http:// or https://"),
    (f"{A} http://user:secret@gpu-b {C}", "entry 2 of 3 must not contain a user name or password"),
    ([A, "http://[::1"], "entry 2 of 2 has a malformed host"),
    (f"{A}, http://gpu-b:99999", "entry 2 of 2 has an invalid port"),
])
def test_a_bad_entry_is_named_by_its_position_and_never_shown(setting: object, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RerankerConfig.from_settings({"rerank_endpoint": setting})
    (problem,) = caught.value.problems
    assert problem.startswith("rerank_endpoint: the URL ") and named in problem
    assert "secret" not in problem and "gpu-b" not in problem


@pytest.mark.parametrize(("value", "mode"), [("auto", "auto"), ("ON", "on"), (True, "on"), (False, "off"),
                                            ("false", "off"), ("off", "off")])
def test_hedge_takes_auto_on_off_and_the_booleans_of_older_settings(value: object, mode: str) -> None:
    assert RerankerConfig.from_settings({"rerank_hedge": value}).hedge == mode


def test_a_hedge_value_that_is_none_of_those_is_named() -> None:
    with pytest.raises(ConfigError, match="rerank_hedge: expected one of auto, on, off"):
        RerankerConfig.from_settings({"rerank_hedge": "sometimes"})


@pytest.mark.parametrize("setting", [f"{A},", f", {A}", f",{A},\n"])
def test_a_stray_comma_around_one_url_is_no_second_entry(setting: str) -> None:
    config = RerankerConfig.from_settings({"rerank_endpoint": setting})
    assert config.endpoint == A and config.endpoints == (A,)
