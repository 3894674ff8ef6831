"""The settings model: one frozen, keyword-only object, validated once at construction. A0 stores settings as
a flat dict of ``rerank_*`` keys; ``RerankerConfig.from_settings`` coerces what forms, YAML, JSON and env
overrides (``A0_SET_*``, always text) deliver and names every bad key in one ``ConfigError``, repeating no more
than a short, safe form of a value. Only ``a0_hooks`` reads A0's settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, get_args, get_origin, get_type_hints

from .endpoint_url import LIST_SEPARATOR, endpoints_problem, split_endpoints
from .errors import ConfigError
from .redaction import UNPRINTABLE, shown_value

ApiMode = Literal["auto", "rerank", "qwen3_score"]
API_MODES: Final = get_args(ApiMode)
HedgeMode = Literal["auto", "on", "off"]
HEDGE_MODES: Final = get_args(HedgeMode)  # auto: on with two replicas or more
QWEN3_DEFAULT_INSTRUCTION: Final = "Given a web search query, retrieve relevant passages that answer the query"
BATCH_WINDOW_SHARE: Final = 0.1  # of a recall's timeout: the most of it its request waits for others to join


@dataclasses.dataclass(frozen=True, kw_only=True)
class RerankerConfig:
    """Every setting, typed and checked; field ``x`` is the setting ``rerank_x``. What is derived is cached: a
    recall reuses the config its settings built before (``a0_hooks.recall_entry``)."""

    enabled: bool = True
    apply: bool = True
    api: ApiMode = "auto"
    endpoint: str = ""
    model: str = ""
    api_key: str = dataclasses.field(default="", repr=False)
    candidates: int = 20
    pool_threshold: float = 0.5  # A0's similarity is (1 + cosine) / 2: 0.5 is cosine 0
    min_score: float = 0.0  # the relevance floor on the 0-1 scale; 0 is off
    instruction: str = QWEN3_DEFAULT_INSTRUCTION
    max_doc_chars: int = 8000
    max_query_chars: int = 1000
    timeout: float = 10.0
    batch_window_ms: float = 10.0
    max_concurrency: int = 4
    max_pairs_per_request: int = 512
    max_queued_pairs: int = 4096
    shed_overload: bool = True
    breaker_failures: int = 3
    breaker_failure_rate: float = 0.5
    breaker_cooldown: float = 15.0
    max_retries: int = 2
    retry_budget: float = 0.2
    hedge: HedgeMode = "auto"
    hedge_delay_ms: float = 0.0
    tls_verify: bool = True
    ca_bundle: str = ""

    def __post_init__(self) -> None:
        problems = [p for f in dataclasses.fields(self) if (p := _check_field(f.name, getattr(self, f.name)))]
        if problems:
            raise ConfigError(problems)
        object.__setattr__(self, "endpoint", LIST_SEPARATOR.join(split_endpoints(self.endpoint)))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> RerankerConfig:
        """Build from A0-style ``rerank_*`` keys; unknown keys are ignored, missing ones take defaults."""
        if settings is not None and not isinstance(settings, Mapping):
            raise ConfigError([f"settings: expected a mapping of rerank_* keys, got {type(settings).__name__}"])
        values, problems = _coerced(settings or {})
        try:  # the values that did coerce are checked too: one error names every bad key
            config = cls(**values)
        except ConfigError as exc:
            problems += exc.problems
        if not problems:
            return config
        order = {key: position for position, key in enumerate(settings_keys())}
        raise ConfigError(sorted(problems, key=lambda problem: order.get(problem.partition(":")[0], len(order))))

    def to_settings(self) -> dict[str, Any]:
        return {setting_key(f.name): getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> RerankerConfig:
        return dataclasses.replace(self, **changes)

    @functools.cached_property
    def configured(self) -> bool:
        """Until an endpoint is set the plugin stays inert."""
        return bool(self.endpoint)

    @functools.cached_property
    def endpoints(self) -> tuple[str, ...]:
        return split_endpoints(self.endpoint)

    @functools.cached_property
    def replicas(self) -> Mapping[str, RerankerConfig]:
        """Each replica's settings by its URL: these aimed at that one server (this config when there is one).
        Read-only: a config is cached and shared by every recall with the same settings."""
        return MappingProxyType({url: self if url == self.endpoint else dataclasses.replace(self, endpoint=url)
                                 for url in self.endpoints})

    @functools.cached_property
    def hedging(self) -> bool:
        return self.hedge == "on" or (self.hedge == "auto" and len(self.endpoints) > 1)

    @functools.cached_property
    def key_fingerprint(self) -> str:
        """A short one-way digest of the API key, for cache keys and logs."""
        return hashlib.sha256(self.api_key.encode()).hexdigest()[:12] if self.api_key else ""


def setting_key(field_name: str) -> str:
    return f"rerank_{field_name}"


def settings_keys() -> list[str]:
    """In panel order."""
    return [setting_key(f.name) for f in dataclasses.fields(RerankerConfig)]


def canonical_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with each ``rerank_*`` value as the plugin reads it (``"yes"`` as ``true``), so a form shows
    what the plugin uses; a value that does not coerce is kept as it is, for the checks to name."""
    return dict(settings) | {setting_key(name): value for name, value in _coerced(settings)[0].items()}


def _coerced(settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The set ``rerank_*`` values that coerce, by field name, and a problem for each that does not."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, coerce in _COERCE.items():
        if (value := settings.get(key := setting_key(name))) is not None:
            try:
                values[name] = coerce(value)
            except (TypeError, ValueError) as exc:
                problems.append(f"{key}: {exc}")
    return values, problems


# Inclusive ranges, written as a user types them (errors repeat them); the panel shows the same limits.
NUMERIC_RANGES: Final[dict[str, tuple[float, float]]] = {
    "candidates": (1, 1000), "pool_threshold": (0, 1), "min_score": (0, 1), "max_doc_chars": (16, 1_000_000),
    "max_query_chars": (16, 1_000_000), "timeout": (0.05, 600), "batch_window_ms": (0, 1000),
    "max_concurrency": (1, 256), "max_pairs_per_request": (1, 10_000), "max_queued_pairs": (1, 1_000_000),
    "breaker_failures": (1, 1000), "breaker_failure_rate": (0.05, 1), "breaker_cooldown": (0.1, 3600),
    "max_retries": (0, 10), "retry_budget": (0, 1), "hedge_delay_ms": (0, 60_000),
}

# --- coercion: what arrives, turned into a setting's type ---------------------------------------------------
_BOOLS: Final = dict.fromkeys(("true", "1", "yes", "on"), True) | dict.fromkeys(("false", "0", "no", "off"), False)


def to_bool(value: Any) -> bool:
    if isinstance(value, int) and value in (0, 1):  # True and False too
        return bool(value)
    if isinstance(value, str) and (flag := _BOOLS.get(value.strip().lower())) is not None:
        return flag
    raise ValueError(f"expected true or false, got {shown_value(value)}")


def to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    with contextlib.suppress(ValueError):
        if isinstance(value, float | str) and (number := to_float(value)).is_integer():
            return int(number)
    raise ValueError(f"expected a whole number, got {shown_value(value)}")


def to_float(value: Any) -> float:
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):  # OverflowError: an int such as 10**400
        raise ValueError(f"expected a number, got {shown_value(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {shown_value(value)}")
    return number


def to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"expected text, got {type(value).__name__}")


def to_choice(value: Any, choices: tuple[str, ...]) -> str:
    text = to_str(value).strip().lower()
    if text not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {shown_value(value)}")
    return text


def to_endpoints(value: Any) -> str:
    """One URL, several in one text, or a YAML/JSON list of them."""
    if isinstance(value, list | tuple):
        return LIST_SEPARATOR.join(to_str(item).strip() for item in value)
    return to_str(value)


def to_switch(value: Any, choices: tuple[str, ...]) -> str:
    """A three-way setting (``auto``/``on``/``off``) that also takes true and false."""
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    try:
        return "on" if to_bool(value) else "off"
    except ValueError:
        raise ValueError(f"expected one of {', '.join(choices)}, got {shown_value(value)}") from None


_FIELD_TYPES: Final = get_type_hints(RerankerConfig)
_CHOICES: Final = {name: get_args(hint) for name, hint in _FIELD_TYPES.items() if get_origin(hint) is Literal}
# What a field of each type takes (a float field takes an int too; a Literal one, text), and how text is coerced
# into it (a type missing here fails at import): text is trimmed, the instruction not.
_ACCEPTED: Final[dict[Any, type | tuple[type, ...]]] = {bool: bool, int: int, float: (int, float), str: str}
_COERCE_TYPE: Final[dict[Any, Callable[[Any], Any]]] = {
    bool: to_bool, int: to_int, float: to_float, str: lambda v: to_str(v).strip(),
}
_TYPES: Final = {name: str if name in _CHOICES else _ACCEPTED[kind] for name, kind in _FIELD_TYPES.items()}
_COERCE_FIELD: Final[dict[str, Callable[[Any], Any]]] = {
    "instruction": to_str, "endpoint": to_endpoints,
    "api": lambda v: to_choice(v, API_MODES), "hedge": lambda v: to_switch(v, HEDGE_MODES),
}
_COERCE: Final = {name: _COERCE_FIELD.get(name) or _COERCE_TYPE[kind] for name, kind in _FIELD_TYPES.items()}

_SECRET_FIELDS: Final = frozenset({"api_key"})  # never echoed; each is also left out of the config's repr
SINGLE_LINE_FIELDS: Final = frozenset({"api_key", "ca_bundle"})  # a header value and a file name (the panel: "line")


def _check_field(name: str, value: Any) -> str | None:
    """What is wrong with one field's value; ``{shown}`` is the value, rendered only then (a key's never)."""
    expected: Any = _TYPES[name]
    if isinstance(value, bool) and expected is not bool:
        problem = f"expected {'a number' if name in NUMERIC_RANGES else 'text'}, got {{shown}}"
    elif not isinstance(value, expected):
        problem = f"expected {getattr(expected, '__name__', 'a number')}, got {{shown}}"
    elif (limits := NUMERIC_RANGES.get(name)) and not limits[0] <= value <= limits[1]:  # NaN too
        problem = f"must be between {limits[0]} and {limits[1]}, got {{shown}}"
    elif name in _CHOICES and value not in _CHOICES[name]:
        problem = f"expected one of {', '.join(_CHOICES[name])}, got {{shown}}"
    elif name in SINGLE_LINE_FIELDS and UNPRINTABLE.search(value):
        problem = "must not contain a line break or other control character"
    elif name == "endpoint" and (url_problem := endpoints_problem(value)):
        problem = f"the URL {url_problem}"
    else:
        return None
    shown = f"a {type(value).__name__}" if name in _SECRET_FIELDS else shown_value(value)
    return f"{setting_key(name)}: {problem.replace('{shown}', shown)}"
