"""Keep secrets out of every text we log, store or return, and keep server-written text displayable.

Servers quote our input in their error text (the Authorization header, the documents they refused) with their
whitespace changed, JSON- or repr-escaped, or cut to their first or last characters; ``redact`` masks all of
these. ``shown`` masks first, then flattens and shortens: doing that first would hide a quote from the masking."""

from __future__ import annotations

import json
import re
import reprlib
from typing import Final

MASK: Final = "***"
ELLIPSES: Final = ("…", "...")  # how we (``shown``) and servers end a shortened text
MIN_SECRET_CHARS: Final = 4  # shorter texts are too common to mask without mangling the message
MIN_QUOTE_CHARS: Final = 16  # a run this long of a secret's first or last characters is a quote of it
SHOWN_CHARS: Final = 400
_WORD: Final = re.compile(r"\S+")
# controls, line breaks and lone surrogates: shown as U+FFFD, refused in a header value or a file name
UNPRINTABLE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# Where a URL's authority starts in a run of text without spaces: after its scheme and slashes (``http:/`` as
# typed with one missing too), after ``http:`` or ``https:`` without them, after a quote or bracket before it.
_URL_START: Final = re.compile(r"""['"(<\[]*(?:[A-Za-z][A-Za-z0-9+.-]*:/+|[Hh][Tt][Tt][Pp][Ss]?:)""")
_QUERY_OR_FRAGMENT: Final = re.compile(r"[?#]")
_CLOSING_MARKS: Final = "'\")>]"  # where a quoted URL ends: kept after a masked ?query or #fragment
# an API key typed with the scheme of its header (``Bearer sk-...``): a server may echo the token alone
TYPED_AUTH_SCHEME: Final = re.compile(r"\A\s*(?:authorization\s*:\s*)?bearer\s+(?=\S)", re.IGNORECASE)
# a URL's ``user:password@`` as ``userinfo_spans`` finds it (an endpoint list is never cut inside one). Within
# one word: from where an authority may start (the text's start, after ``//`` or a space) to its last ``@``;
# commas, ``?`` and ``#`` are allowed in it (a password may hold them, though a URL parser then ends the
# authority early), ``/`` and spaces end it, unless ``user:`` comes first and what follows the colon is no port:
# then it runs to the next ``@``. Across words: after a scheme's ``//`` (or at the text's start), ``user:`` and
# no port run to the next ``@`` over spaces and commas too, as a password typed raw (``pa ss``) may hold them;
# such a span then runs on to the last ``@`` before the next URL, as the password may hold an ``@`` too.
_NO_PORT: Final = r":(?![0-9]*(?:[/?#,\s]|$))"
_USERINFO: Final = re.compile(
    rf"(?:^|(?<=//)|(?<=\s))(?:[^/\s]*@|[^/?#\s@:]*{_NO_PORT}[^\s@]*@)|(?:^|(?<=//))[^/?#@:]*{_NO_PORT}[^@]*@"
)
_USER_NO_PORT: Final = re.compile(rf"[^/?#@:]*{_NO_PORT}")
_NEXT_URL: Final = re.compile(r"""(?<=[\s,])['"(<\[]*[A-Za-z][A-Za-z0-9+.-]*:/""")  # a word that starts as a URL
Span = tuple[int, int]


def redact(text: str, *secrets: str) -> str:
    """``text`` with every quote of each (non-trivial) secret masked, the rest in its layout. Of a secret longer
    than the text only its ends are read, so a megabyte memory costs no more."""
    flat, places = _flatten(text)
    escaped = "\\" in flat
    bare = [secret[prefix.end():] for secret in secrets if (prefix := TYPED_AUTH_SCHEME.match(secret)) is not None]
    spans = sorted(span for secret in (*secrets, *bare) for form in _forms(secret, escaped, len(flat))
                   for span in _quotes(flat, form))
    if not spans:
        return text
    pieces, kept_from = [], 0
    for first, last in _merged(spans):
        first, last = first + (flat[first] == " "), last - (flat[last - 1] == " ")  # mask words, not a gap
        pieces += [text[kept_from : places[first]], MASK]
        kept_from = places[last - 1] + 1
    return "".join([*pieces, text[kept_from:]])


def shown(text: str, *secrets: str) -> str:
    """One printable line of at most ``SHOWN_CHARS``: secrets and any quoted URL's ``user:password@`` masked first."""
    return clipped(UNPRINTABLE.sub("\ufffd", " ".join(without_userinfo(redact(text, *secrets)).split())), SHOWN_CHARS)


def clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSES[0]


def userinfo_spans(text: str) -> list[Span]:
    """Where ``text`` holds a URL's ``user:password@`` (``_USERINFO``), each span ending at its ``@``; only the
    text up to its last ``@`` is searched, so a long text without one costs one pass."""
    spans: list[Span] = []
    for first, last in (match.span() for match in _USERINFO.finditer(text, 0, text.rfind("@") + 1)):
        if spans and first < spans[-1][1]:  # within the one before, run on past its first @
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            spans.append((first, _to_last_at(text, first, last)))
    return spans


def _to_last_at(text: str, first: int, last: int) -> int:
    """Where a span of ``user:`` (no port) after ``//`` or at the start ends: at the last ``@`` before the next URL."""
    if not (first == 0 or text[first - 2 : first] == "//") or _USER_NO_PORT.match(text, first, last) is None:
        return last
    following = _NEXT_URL.search(text, last)
    return max(last, text.rfind("@", last, following.start() if following else len(text)) + 1)


def without_userinfo(text: str) -> str:
    """``text`` with each URL's ``user:password@`` masked unparsed: first those over spaces (``userinfo_spans``),
    then in each run without spaces from where the authority starts to its last ``@`` (a password may hold
    ``@ / ? # ,``, a token typed as the user name a ``/``; no endpoint may hold an ``@``)."""
    return _WORD.sub(lambda run: _run_without_userinfo(run.group()), _spans_masked(text)) if "@" in text else text


def without_url_secrets(text: str, *, all_urls: bool = False) -> str:
    """``without_userinfo``, and each URL's ``?query`` and ``#fragment`` masked too: an API key or a token may be
    typed there (``?api_key=...``). A run counts as a URL when it starts as one, or (``all_urls``: the text is
    an endpoint setting) always, also without a scheme (``127.0.0.1:8000/?key=...``)."""
    return _WORD.sub(lambda run: _run_without_url_secrets(run.group(), all_urls), _spans_masked(text))


def _spans_masked(text: str) -> str:
    pieces, kept_from = [], 0
    for first, last in userinfo_spans(text):
        pieces += [text[kept_from:first], MASK, "@"]
        kept_from = last
    return "".join([*pieces, text[kept_from:]])


def _run_without_userinfo(run: str) -> str:
    at = run.rfind("@")
    if at < 0:
        return run
    start = _URL_START.match(run)
    authority = start.end() if start is not None and start.end() <= at else 0
    return f"{run[:authority]}{MASK}{run[at:]}"


def _run_without_url_secrets(run: str, all_urls: bool) -> str:
    run = _run_without_userinfo(run)
    start = _URL_START.match(run)
    if start is None and not all_urls:
        return run
    mark = _QUERY_OR_FRAGMENT.search(run, start.end() if start is not None else 0)
    if mark is None:
        return run
    cut = mark.end()
    closing = run[max(cut, len(run.rstrip(_CLOSING_MARKS))):]  # a quoted URL's closing quote stays
    return f"{run[:cut]}{MASK}{closing}"


def shown_value(value: object) -> str:
    """A short repr of a foreign value, whatever its size or depth; URL secrets in its texts masked before the
    shortening could cut off the ``@`` that ends a password."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    try:
        return _REPR.repr(value)
    except Exception:  # e.g. a list holding an integer too long for repr()
        return f"a {type(value).__name__}"


class _MaskedRepr(reprlib.Repr):
    """reprlib's short repr, each text in it (bytes read as Latin-1) passed through ``without_url_secrets``."""

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(without_url_secrets(x), level)

    def repr_bytes(self, x: bytes, level: int) -> str:
        return "b" + super().repr_str(without_url_secrets(x.decode("latin-1")), level)


_REPR: Final = _MaskedRepr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlevel = 3


def _flatten(text: str) -> tuple[str, list[int]]:
    """``text`` with each whitespace run as one space, and where in ``text`` each of its characters stands (a
    space: at its run's last character, one before the next word)."""
    words = list(_WORD.finditer(text))
    places: list[int] = []
    for word in words:
        places.extend(range(word.start() - 1, word.end()))  # the space before the word, then the word
    return " ".join(word.group() for word in words), places[1:]  # the first word has no space before it


def _forms(secret: str, escaped: bool, room: int) -> set[str]:
    """The secret flattened as the text is, and JSON- and repr-escaped when the text holds escapes; one longer
    than ``room`` (the flat text's length) as its head and tail of that length. An edge of whitespace (a query
    our cut ended on a space) is also kept as one space: a quote of its last characters may count it."""
    if room < MIN_SECRET_CHARS or (len(secret) <= 2 * MIN_SECRET_CHARS and len(secret.strip()) < MIN_SECRET_CHARS):
        return set()
    pieces = [secret] if len(secret) <= room else [_flat_end(secret, room, True), _flat_end(secret, room, False)]
    variants = set(pieces)  # each flattened once: escaping most texts changes nothing
    if escaped:
        variants.update(quoted for piece in pieces for quoted in (
            json.dumps(piece)[1:-1], json.dumps(piece, ensure_ascii=False)[1:-1], repr(piece)[1:-1]))
    forms: set[str] = set()
    for variant in variants:
        flat = " ".join(variant.split())
        forms |= {flat, " " * variant[:1].isspace() + flat + " " * variant[-1:].isspace()}
    return {form for form in forms if len(form.replace(" ", "")) >= MIN_SECRET_CHARS}  # blanks quote nothing


def _flat_end(secret: str, room: int, head: bool) -> str:
    """The secret's first (or last) characters, enough to fill ``room`` once flattened."""
    size = room
    while True:
        piece = secret[:size] if head else secret[-size:]
        if size >= len(secret) or len(" ".join(piece.split())) >= room:
            return piece
        size *= 2


def _quotes(flat: str, form: str) -> list[Span]:
    """Where ``flat`` holds ``form``, a run of at least MIN_QUOTE_CHARS of its start or end, or a shorter run of
    its start cut off by an ellipsis."""
    spans = [(i, i + len(form)) for i in _occurrences(flat, form)]
    if len(form) > MIN_QUOTE_CHARS:
        spans += [(i, i + _common(flat, form, i, head=True)) for i in _occurrences(flat, form[:MIN_QUOTE_CHARS])]
        spans += [(end - _common(flat, form, end, head=False), end)
                  for end in (i + MIN_QUOTE_CHARS for i in _occurrences(flat, form[-MIN_QUOTE_CHARS:]))]
    for end in (i for mark in ELLIPSES for i in _occurrences(flat, mark)):
        for size in range(min(len(form) - 1, MIN_QUOTE_CHARS, end), MIN_SECRET_CHARS - 1, -1):
            if flat.startswith(form[:size], end - size):
                spans.append((end - size, end))
                break
    return spans


def _occurrences(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def _common(text: str, form: str, at: int, *, head: bool) -> int:
    """How many first characters of ``form`` ``text`` holds from ``at`` (``head``), or last ones before it."""
    low, high = 0, min(len(text) - at if head else at, len(form))
    while low < high:
        middle = (low + high + 1) // 2
        holds = text.startswith(form[:middle], at) if head else text.endswith(form[len(form) - middle :], 0, at)
        low, high = (middle, high) if holds else (low, middle - 1)
    return low


def _merged(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for first, last in spans:
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged
