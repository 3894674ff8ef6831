"""Options shared by the commands that talk to a reranker server, and the config they build."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any, Final

from ..core.config import API_MODES, RerankerConfig
from ..core.endpoint_url import shown_endpoints
from ..core.errors import ConfigError
from .exits import CliError

DEFAULT_TIMEOUT: Final = RerankerConfig().timeout
# how environment variables are named by convention; anything else given to --key-env may be the key itself
_VARIABLE_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]*")
# the plugin's settings a command line sets, each by the option that sets it
OPTION_OF: Final = {"rerank_timeout": "--timeout", "rerank_model": "--model", "rerank_api": "--api",
                    "rerank_api_key": "--key-env", "rerank_max_queued_pairs": "--max-queued-pairs"}
_SETTING: Final = re.compile(r"\brerank_\w+")


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """``--api --model --key-env --timeout`` (the endpoint itself is added by each command)."""
    parser.add_argument("--api", choices=API_MODES, default="auto",
                        help="the protocol to speak (default: auto-detect, as the plugin does)")
    parser.add_argument("--model", default="", help="model id the server expects (default: what it lists)")
    parser.add_argument("--key-env", metavar="VAR", default="",
                        help="name of the environment variable that holds the API key (never pass the key itself)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                        help=f"seconds to wait (default: {DEFAULT_TIMEOUT:g})")


def server_options_given(args: argparse.Namespace) -> list[str]:
    given = {"--api": args.api != "auto", "--model": bool(args.model), "--key-env": bool(args.key_env),
             "--timeout": args.timeout != DEFAULT_TIMEOUT}
    return [option for option, set_ in given.items() if set_]


def server_config(args: argparse.Namespace, endpoint: str, **settings: Any) -> RerankerConfig:
    """The plugin's config, validated as the settings panel's is; the key from the variable ``--key-env`` names."""
    key = os.environ.get(args.key_env, "").strip() if args.key_env else ""
    if args.key_env and not key:
        if _VARIABLE_NAME.fullmatch(args.key_env):
            raise CliError(f"--key-env {args.key_env}: the environment variable {args.key_env} is not set or empty")
        raise CliError("--key-env: no environment variable of the name given is set, or it is empty (give the "
                       "variable's name, not the key itself)")  # what was given may be the key: not repeated
    try:
        config = RerankerConfig(endpoint=endpoint, api=args.api, model=args.model.strip(), api_key=key,
                                timeout=args.timeout, **settings)
    except ConfigError as exc:
        raise CliError(config_problem(exc, endpoint)) from None
    if not config.configured:  # blank, or only separators: a URL missing, not a server that fails
        raise CliError(f"endpoint {shown_endpoints(endpoint)!r}: no URL given (the server's base URL, "
                       "e.g. http://HOST:PORT)")
    return config


def config_problem(error: ConfigError, endpoint: str) -> str:
    """ConfigError's lines, each setting named as the option that sets it (the endpoint less its passwords)."""
    names = {"rerank_endpoint": f"endpoint {shown_endpoints(endpoint)!r}", **OPTION_OF}
    parts = (problem.partition(": ") for problem in error.problems)
    return "; ".join(f"{names[key]}: {text}" if key in names and text else key + sep + text for key, sep, text in parts)


def as_options(text: str) -> str:
    """``text`` (written for A0's users) with each setting a command line sets named as its option."""
    return _SETTING.sub(lambda found: OPTION_OF.get(found[0], found[0]), text)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def port_number(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {value}")
    return value
