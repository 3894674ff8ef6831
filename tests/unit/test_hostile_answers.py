"""Issue 15, the pure half: answers, settings and texts built to break the reader. Each either reads or
is refused with our own error (``MalformedAnswer``, ``ServerError``, ``ConfigError``), never another one;
masking finds what was sent however the server wrote it back."""

from __future__ import annotations

import json
import math
import time

import pytest

from usr.plugins.a0_reranker.core import detection as det
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.dialects import ScoreBatch, WireAnswer
from usr.plugins.a0_reranker.core.dialects import catalog as cat
from usr.plugins.a0_reranker.core.dialects.wire import read_answer, read_json, scores_from_items
from usr.plugins.a0_reranker.core.endpoint_url import endpoint_problem, endpoints_problem, shown_endpoints
from usr.plugins.a0_reranker.core.errors import BreakerOpen, ConfigError, MalformedAnswer, ServerError
from usr.plugins.a0_reranker.core.probe_report import ProbeReport
from usr.plugins.a0_reranker.core.redaction import (
    MASK,
    redact,
    shown,
    shown_value,
    without_url_secrets,
    without_userinfo,
)

BATCH = ScoreBatch.single("q", ["a", "b"])
DEEP = b"[" * 100_000 + b"]" * 100_000
KEY = "sk-live-7f3a9c2e-DO-NOT-LEAK"


def answer(body: bytes, status: int = 200) -> WireAnswer:
    return WireAnswer(status=status, body=body, content_type="application/json")


# --- reading answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "problem"), [
    (b'{"results": [{"index": 0, "relevance_score": 1' + b"0" * 400 + b'}]}', "integer of more than 320 digits"),
    (DEEP, "nested too deeply"),
    (b'{"results": [{"index": 0, "relevance_score": 0.5', "not JSON"),
    (b'{"results": "\xff\xfe"}', "not UTF-8"),
    (b"1" * 5000, "integer of more than 320 digits"),
])
def test_json_beyond_reason_is_refused_while_it_is_parsed(body: bytes, problem: str) -> None:
    with pytest.raises(MalformedAnswer, match=problem):
        read_json(body)
    with pytest.raises(MalformedAnswer, match=problem):
        cat.VLLM_RERANK.parse(answer(body), BATCH)


def test_a_long_integer_in_a_field_nobody_reads_does_not_spoil_a_good_answer() -> None:
    body = json.dumps({"id": 2**127, "created": 10**20, "results": [
        {"index": 1, "relevance_score": 0.9, "document": 10**300}, {"index": 0, "relevance_score": 0.1}]}).encode()
    assert cat.VLLM_RERANK.parse(answer(body), BATCH) == [0.1, 0.9]


def test_a_huge_float_literal_is_infinite_and_refused_as_a_score() -> None:
    body = json.dumps({"results": [{"index": 0, "relevance_score": 0.1}, {"index": 1, "relevance_score": 0.2}]})
    assert read_json(body.replace("0.1", "1e999").encode())["results"][0]["relevance_score"] == math.inf
    with pytest.raises(MalformedAnswer, match="not a finite number"):
        cat.VLLM_RERANK.parse(answer(body.replace("0.1", "1e999").encode()), BATCH)


def test_an_integer_too_large_for_a_float_is_a_malformed_score_even_without_json() -> None:
    items = [{"index": 0, "relevance_score": 10**400}, {"index": 1, "relevance_score": 1}]
    with pytest.raises(MalformedAnswer, match="integer of about 400 digits is not a finite number"):
        scores_from_items(items, 2, ("relevance_score",))


def test_the_boundary_turns_any_exception_into_a_malformed_answer_and_keeps_our_own() -> None:
    def breaks(error: Exception) -> None:
        raise error

    for error in (TypeError("x"), AttributeError("x"), OverflowError("x"), RecursionError("x"), KeyError("x")):
        with pytest.raises(MalformedAnswer, match=type(error).__name__):
            read_answer(breaks, error)
    with pytest.raises(ServerError):
        read_answer(breaks, ServerError(503, "busy"))
    assert read_answer(lambda a, *, b: a + b, 1, b=2) == 3


@pytest.mark.parametrize("detail", [
    [{"loc": 5}], [{"loc": "body"}], [{"loc": [{"deep": 1}, None, 3], "msg": 7}], [5, "x"], {"loc": 5},
])
def test_a_422_whose_detail_has_any_shape_is_an_http_error_with_a_message(detail: object) -> None:
    body = json.dumps({"detail": detail}).encode()
    with pytest.raises(ServerError) as refused:
        cat.VLLM_RERANK.parse(answer(body, status=422), BATCH)
    assert refused.value.status == 422 and refused.value.message


@pytest.mark.parametrize("body", [DEEP, b'{"error": {"message": 1' + b"0" * 50 + b"}}", b"\xff\xfe{", b"{" * 5000])
def test_an_error_body_that_cannot_be_read_falls_back_to_the_status_hint(body: bytes) -> None:
    with pytest.raises(ServerError) as refused:
        cat.VLLM_RERANK.parse(answer(body, status=503), BATCH)
    assert refused.value.message == "service unavailable" or refused.value.message.startswith("\ufffd")


def test_an_error_message_keeps_its_layout_for_the_masking_and_is_bounded() -> None:
    body = json.dumps({"error": {"message": "first line\n  second   line " + "x" * 5000}}).encode()
    with pytest.raises(ServerError) as refused:
        cat.VLLM_RERANK.parse(answer(body, status=400), BATCH)
    assert refused.value.message.startswith("first line\n  second   line")
    assert len(refused.value.message) == 2000 and refused.value.message.endswith("…")


# --- identify(): the GETs are hints --------------------------------------------------------------------

HOSTILE_LISTINGS = [
    {"object": "list", "data": [{"id": "m", "owned_by": "infinity", "capabilities": ["rerank"]}, 7, None, "x"]},
    {"object": "list", "data": [{"id": "m", "owned_by": "infinity", "capabilities": 5}]},
    {"object": "list", "data": [{"id": {"nested": 1}, "owned_by": ["vllm"]}, {"id": 5, "owned_by": 5}]},
    {"object": "list", "data": [{"id": "x" * 10_000, "owned_by": "vllm"}]},
    {"object": "list", "data": 5},
    [1, 2, 3],
    "text",
]


@pytest.mark.parametrize("listing", HOSTILE_LISTINGS)
@pytest.mark.parametrize("path", ["/v1/models", "/models"])
def test_a_hostile_models_listing_never_breaks_identify(listing: object, path: str) -> None:
    identity = det.identify({"/info": None, path: listing, "/api/version": None})
    assert all(isinstance(m, str) and len(m) <= det.MAX_MODEL_ID_CHARS for m in identity.models)


def test_a_listing_entry_that_is_no_object_is_skipped_and_the_rest_still_identifies() -> None:
    identity = det.identify({"/v1/models": HOSTILE_LISTINGS[0]})
    assert (identity.kind, identity.models, identity.problem) == ("infinity", ("m",), "")


def test_a_get_body_that_breaks_reading_counts_as_absent_and_the_others_still_count() -> None:
    class Exploding(dict):  # a body whose every lookup fails, standing in for shapes nobody foresaw
        def get(self, *_args: object) -> object:
            raise TypeError("boom")

    vllm = {"object": "list", "data": [{"id": "a0-reranker", "owned_by": "vllm"}]}
    identity = det.identify({"/info": Exploding(), "/v1/models": vllm})
    assert (identity.kind, identity.default_model) == ("vllm", "a0-reranker")
    assert det.identify({"/info": Exploding()}) == det.ServerIdentity()


@pytest.mark.parametrize("info", [
    {"model_type": 5, "max_client_batch_size": "x", "version": None, "model_id": ["a"]},
    {"model_type": {"reranker": 1}, "max_client_batch_size": -3, "version": 1, "served_model_name": {"a": 1}},
])
def test_a_hostile_tei_info_is_read_without_error(info: dict[str, object]) -> None:
    identity = det.identify({"/info": info})
    assert identity.kind == "tei" and identity.models == () and identity.max_client_batch is None


def test_judging_scores_at_the_edges_of_the_float_range_does_not_raise() -> None:
    dialect = cat.VLLM_RERANK
    outcome = det.ProbeOutcome(dialect, scores=(1e308, 1e308, -1e308, -1e308))
    assert read_answer(det.judge, [outcome]) is outcome
    assert "ranks correctly" in outcome.describe()


# --- masking ------------------------------------------------------------------------------------------

DOC = "The backup key\n  lives in the vault — rotated every   ninety days by the admin team, café ☕ 東京."


@pytest.mark.parametrize("written", [
    DOC,  # as sent
    " ".join(DOC.split()),  # whitespace flattened by the server
    DOC.replace("\n", "\n\n\t"),  # whitespace changed another way
    json.dumps(DOC)[1:-1],  # JSON-escaped into a message
    json.dumps(DOC, ensure_ascii=False)[1:-1],
    repr(DOC),  # repr-quoted (Python servers, FastAPI)
    DOC[:40] + "...",  # the server quoted only the start
    "..." + DOC[-30:],  # or only the end
])
def test_a_quoted_document_is_masked_however_the_server_wrote_it(written: str) -> None:
    text = shown(f"HTTP 422: unsupported document {written} (see docs)", DOC)
    assert "backup key" not in text and "ninety days" not in text and "東京" not in text and MASK in text
    assert text.startswith("HTTP 422: unsupported document") and text.endswith("(see docs)")


def test_an_error_is_masked_of_every_text_its_request_carried_as_sent() -> None:
    """A request carries the query and memories cut to the limits; a server can quote only those, whole
    or cut again, and the error each waiting recall gets has all of them masked, not its own alone."""
    query = "rotate the backup key " * 100  # 2,200 characters: A0's queries are longer than the cut
    document = "vault rotation notes: " + "ninety days " * 200
    other = "another agent's memory about the payroll export schedule"
    sent = (query[:1000], document[:2000], other)
    for quoted in (query[:1000], query[:500], document[:2000], document[:2000].rstrip()[-60:], other):
        error = ServerError(400, f"refused: '{quoted}' is too long").masked(*sent)
        text = shown(str(error), KEY)
        assert "rotate the backup" not in text and "ninety days" not in text and "payroll" not in text, text
        assert "payroll" not in error.message and isinstance(error, ServerError) and error.status == 400
    assert BreakerOpen("fixed text").masked(*sent).args == ("fixed text",)  # the engine's own words: kept


def test_a_quote_of_a_text_cut_on_a_space_counts_that_space() -> None:
    """Found by the answer fuzzer: the query as sent ended on a space (our cut fell there), and the
    server quoted its last 16 characters, that space included. Flattened without its edge the quote was
    15 characters, under the length that makes a quote, and went out unmasked."""
    sent = "MARK where did we put  the backup keys — "  # our cut ended on the space
    quote = sent[-16:]
    assert quote == "e backup keys — "
    assert redact(f"HTTP 400: got {quote}here", sent) == "HTTP 400: got *** here"
    assert redact(f"HTTP 400: got {quote.rstrip()}", sent) == "HTTP 400: got e backup keys —"  # 15: no quote


def test_a_blank_text_among_the_secrets_masks_nothing_and_breaks_nothing() -> None:
    """Found in review: a memory of nine or more blanks got past the length check, flattened to an empty
    form that matched everywhere, and the masking raised IndexError (in a failed request's error path, so
    its waiters sat until their deadline)."""
    text = "HTTP 400: hello world foo bar"
    for blank in (" " * 9, "\n" * 12, " \t " * 5):
        assert redact(text, blank) == text and shown(text, blank) == text
        assert ServerError(400, text).masked(blank, DOC).message == text
    assert redact("got  ab  here", "  ab     ") == "got  ab  here"  # two characters quote nothing


def test_a_document_cut_by_our_own_shortening_is_masked() -> None:
    message = "invalid document: " + "x" * 1900 + DOC
    with pytest.raises(ServerError) as refused:
        cat.VLLM_RERANK.parse(answer(json.dumps({"detail": message}).encode(), status=422), BATCH)
    assert refused.value.message.endswith("…")
    assert "The backup" not in redact(refused.value.message, DOC)


def test_masking_keeps_the_layout_outside_what_it_masks() -> None:
    assert redact(f"line one\n  Bearer {KEY}\nline three", KEY) == "line one\n  Bearer ***\nline three"
    assert redact("short words stay: the a of", "the") == "short words stay: the a of"  # under 4 characters
    assert redact("", KEY) == "" and redact("nothing", "") == "nothing"


def test_shown_is_one_printable_line_cut_after_masking() -> None:
    text = shown("a\n\tb \x1b[31mred\x1b[0m \ud800 " + "y" * 1000 + KEY, KEY)
    assert text.startswith("a b \ufffd[31mred\ufffd[0m \ufffd y") and len(text) == 400 and text.endswith("…")
    assert "\n" not in text and "\x1b" not in text


def test_every_text_of_a_probe_report_is_masked() -> None:
    bearer = f"Bearer {KEY}"
    report = ProbeReport(ok=False, endpoint="http://127.0.0.1:1", message=f"no ({bearer})", api="rerank",
                         server=bearer, dialect="rerank", path="/rerank", model=bearer, attempts=(bearer, "x"))
    shown_report = json.dumps(report.redacted(KEY).as_dict())
    assert KEY not in shown_report and KEY[:12] not in shown_report
    assert report.redacted(KEY).endpoint == report.endpoint


def test_userinfo_is_taken_out_of_any_url_text_without_parsing_it() -> None:
    assert without_userinfo("http://user:pw@[::1") == "http://***@[::1"
    assert without_userinfo("https://u:p@h:80/p@th?q=@") == "https://***@"  # to the last @: see below
    assert without_userinfo("u:p@127.0.0.1:8000") == "***@127.0.0.1:8000"
    assert without_userinfo("") == ""


def test_userinfo_is_taken_out_of_every_entry_of_an_endpoint_list() -> None:
    assert without_userinfo("http://a:1, http://u:p@b:2") == "http://a:1, http://***@b:2"
    assert without_userinfo("http://a:1 u:p@b:2\nhttps://x:y@c/p") == "http://a:1 ***@b:2\nhttps://***@c/p"
    assert without_userinfo("http://a:1, http://u:p,w@b:2") == "http://a:1, http://***@b:2"  # a comma in a password


@pytest.mark.parametrize(("typed", "shown"), [
    ("http://admin:s3cr/t@host:8000", "http://***@host:8000"),
    ("http://admin:a?b#c@host/path", "http://***@host/path"),
    ("http://a:1, u:x/y@b:2", "http://a:1, ***@b:2"),
])
def test_a_password_holding_a_slash_question_mark_or_hash_is_masked_too(typed: str, shown: str) -> None:
    """Such a URL is invalid (the config says "invalid port"), but the status tool and the CLI's error show it
    as typed: the password must not reach them. ``user:`` followed by something no port is marks userinfo."""
    assert without_userinfo(typed) == shown
    assert "s3cr" not in shown_endpoints(typed) and "a?b" not in shown_endpoints(typed)


@pytest.mark.parametrize(("text", "shown"), [
    ("https://tok3n/Zx9vQ+Lm2w@h:8000", "https://***@h:8000"),  # a token with a / typed as the user name
    ("http://admin:p@ss/word@h", "http://***@h"),  # a password with an @ and a /
    ("http://host/a@b", "http://***@b"),  # reads the same as the first: masked too (no endpoint may hold an @)
    ("http:/admin:pw@h", "http:/***@h"), ("http:admin:pw@h", "***@h"),  # a slash or two missing
    ("'http://admin:pw@h'", "'http://***@h'"), ("x http://h:1,http://u:p@h2", "x http://***@h2"),
])
def test_a_urls_every_at_sign_ends_a_user_name_or_password(text: str, shown: str) -> None:
    """Which @ ends a password that holds @ and / cannot be told from a path holding an @: the last one is."""
    assert without_userinfo(text) == shown


@pytest.mark.parametrize(("typed", "shown"), [
    ("http://h:2/?api_key=sk-q7Zt93", "http://h:2/?***"), ("http://h/#access_token=t0k", "http://h/#***"),
    ("127.0.0.1:8000/v1?key=sk-1, http://h:1", "127.0.0.1:8000/v1?***, http://h:1"),  # no scheme: still a URL
    ("http://h?k=a,b http://u:p@g?x", "http://h?***, http://***@g?***"),  # a comma in a query is no separator
])
def test_an_endpoint_shown_masks_its_query_and_fragment(typed: str, shown: str) -> None:
    assert shown_endpoints(typed) == shown


def test_a_url_in_other_text_has_its_query_masked_but_other_words_are_kept() -> None:
    assert without_url_secrets("got 'http://h/?api_key=sk-1' (why?)") == "got 'http://h/?***' (why?)"
    assert without_url_secrets("what? a@b") == "what? ***@b"


@pytest.mark.parametrize("value", [["http://u:pw-c8e1@h/?k=sk-c8e1"], {"k": "http://u:pw-c8e1@h"},
                                   b"http://u:pw-c8e1@h", ("x" * 80 + " http://u:pw-c8e1@h",)])
def test_a_foreign_value_is_shown_without_the_passwords_it_holds(value: object) -> None:
    assert "c8e1" not in shown_value(value) and "***@h" in shown_value(value)


@pytest.mark.parametrize("typed", ["Bearer k3y-7Zq9x2", "bearer   k3y-7Zq9x2", " BEARER k3y-7Zq9x2 ",
                                   "Authorization: Bearer k3y-7Zq9x2"])
def test_a_key_typed_with_its_bearer_prefix_is_masked_alone_too(typed: str) -> None:
    assert redact("invalid API key k3y-7Zq9x2", typed) == "invalid API key ***"
    assert redact(f"header was {typed.strip()}", typed) == "header was ***"


@pytest.mark.parametrize(("typed", "shown"), [
    ("http://ops3:pa7 s9@host:8000", "http://***@host:8000"),
    ("http://ops3 x:pa7 s9@h", "http://***@h"),
    ("http://ops3:pa7 s9/t@host", "http://***@host"),
    ("ops3:pa7 s9@host:8000", "***@host:8000"),
    ("http://h1:1 http://ops3:pa7 s9, w@h2:8000", "http://h1:1, http://***@h2:8000"),
])
def test_a_password_typed_raw_with_spaces_or_commas_is_one_entry_masked_whole(typed: str, shown: str) -> None:
    """Typed raw (``pa ss`` for ``pa%20ss``), a password holds the list's separators: they separate nothing,
    so no part of it is shown as an entry of its own and the entry is refused as holding a password."""
    assert shown_endpoints(typed) == shown
    assert without_userinfo(typed).replace(" ", ", ") == shown
    problem = endpoints_problem(typed)
    assert problem is not None and "pa7" not in problem and "s9" not in problem and "ops3" not in problem
    assert problem.endswith(("must not contain a user name or password (put a key in rerank_api_key)",
                             "must start with http:// or https://", "has an invalid port",
                             "must not contain @ (a user name or password goes in no URL: put a key in rerank_api_key)"))


@pytest.mark.parametrize(("typed", "shown"), [
    ("http://u:p7@zq9 w4@h", "http://***@h"),
    ("http://u:p7@zq9, w4@h:8000", "http://***@h:8000"),
    ("http://h1:1 http://ops3:p7@zq9 w4@h2:8000", "http://h1:1, http://***@h2:8000"),
    ("http://ops3:p7@zq9 w4@h1 http://h2:2", "http://***@h1, http://h2:2"),
    ("http://u:p7@h1 http://x:zq9@h2", "http://***@h1, http://***@h2"),  # two entries, each with its password
])
def test_a_password_typed_raw_with_an_at_sign_and_a_space_is_masked_to_its_last_at(typed: str, shown: str) -> None:
    """A raw password may hold both: the URL's ``user:`` then runs to its last ``@`` before the next URL, and
    the rest of the password is no entry of its own."""
    assert shown_endpoints(typed) == shown
    assert without_userinfo(typed).replace(" ", ", ").replace(",,", ",") == shown
    problem = endpoints_problem(typed)
    assert problem is not None and not any(part in problem for part in ("p7", "zq9", "w4")), problem
    assert f"of {shown.count(', ') + 1}" in problem or "entry" not in problem, problem


@pytest.mark.parametrize("unit", ["//a:b", "//a:b ", "//a:1 ", "x:"])
def test_masking_a_long_text_takes_one_pass(unit: str) -> None:
    """A server's answer quoted in an error is masked before it is cut: however it is built, that is fast. Forty
    times the text costs 25 to 45 times as long; a quadratic pattern would cost 1,600 times (it took 22 s at
    40,000 units). The bound sits six times from either, so a busy machine's preemptions do not decide it (at ten
    times the text against a bound of 40, a run with both cores kept busy failed)."""
    def cost(repeats: int) -> float:
        text = unit * repeats + "@"
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            shown_value(text), shown_endpoints(text), endpoints_problem(text)
            best = min(best, time.perf_counter() - started)
        return best

    assert cost(40_000) < 250 * cost(1_000)



def test_a_foreign_value_is_shown_short_whatever_it_is() -> None:
    assert shown_value(10**5000) == "an integer of about 5000 digits"
    assert len(shown_value("x" * 10_000)) <= 70 and len(shown_value(list(range(10_000)))) <= 70
    nested: list[object] = []
    for _ in range(5000):
        nested = [nested]
    assert shown_value(nested) == "[[[[...]]]]"


# --- settings -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "http://[::1", "http://[127.0.0.1]:80", "http://ex℀ample.com", "http://user:secret@ex℀ample.com",
    "http://exa mple.com", "http://ex\nample.com", "http://h\x00st", "http://\udcff.com", "http://h:99999",
])
def test_a_url_urlsplit_cannot_read_is_a_named_problem_that_does_not_repeat_it(url: str) -> None:
    problem = endpoint_problem(url)
    assert problem and "secret" not in problem and "ample" not in problem
    with pytest.raises(ConfigError, match="rerank_endpoint: the URL"):
        RerankerConfig(endpoint=url)


@pytest.mark.parametrize("key", [f"{KEY[:8]}\n{KEY[8:]}", f"{KEY[:8]}\r\n{KEY[8:]}", f"{KEY}\x00", f"{KEY}\u2028x",
                                 f"\x1b[2J{KEY}"])
def test_an_api_key_with_a_control_character_is_a_settings_problem_that_never_echoes_it(key: str) -> None:
    for build in (lambda: RerankerConfig(api_key=key), lambda: RerankerConfig.from_settings({"rerank_api_key": key})):
        with pytest.raises(ConfigError) as refused:
            build()
        assert refused.value.problems == ["rerank_api_key: must not contain a line break or other control character"]
        assert KEY[:8] not in repr(refused.value)
    with pytest.raises(ConfigError, match="rerank_api_key"):
        RerankerConfig(api_key=f"{KEY}\n")


def test_a_key_pasted_with_a_trailing_line_break_is_trimmed_as_settings_are() -> None:
    assert RerankerConfig.from_settings({"rerank_api_key": f" {KEY}\n"}).api_key == KEY


@pytest.mark.parametrize(("settings", "key"), [
    ({"rerank_timeout": 10**400}, "rerank_timeout"),
    ({"rerank_candidates": 10**5000}, "rerank_candidates"),
    ({"rerank_breaker_cooldown": "1" * 5000}, "rerank_breaker_cooldown"),
    ({"rerank_enabled": [[[[["deep"]]]]]}, "rerank_enabled"),
    ({"rerank_ca_bundle": "a\x00b"}, "rerank_ca_bundle"),
])
def test_an_unreasonable_value_is_a_config_error_naming_its_key(settings: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RerankerConfig.from_settings(settings)
    assert [p.split(":")[0] for p in refused.value.problems] == [key]
    assert len(str(refused.value)) < 200


def test_settings_that_are_no_mapping_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="settings: expected a mapping"):
        RerankerConfig.from_settings("text")  # type: ignore[arg-type]


def test_a_normalized_endpoint_stays_as_it_is_when_the_config_is_rebuilt() -> None:
    config = RerankerConfig(endpoint="http://127.0.0.1:8000/v1/rerank/v1")
    assert config.endpoint == "http://127.0.0.1:8000" == config.replace(timeout=5).endpoint
