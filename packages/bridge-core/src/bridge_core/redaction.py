"""Masking every configured value that can carry a secret, wherever a text leaves the host's trust.

One concept: a :class:`Redactor` holds the secret strings derived from the proxied servers'
definitions (:func:`configured_secrets`) and replaces each occurrence with ``***``. The bridge
applies it at three boundaries, and only there: every reply to the sandbox (results, errors,
discovery answers: :class:`~bridge_core.proxy.ProxyGateway`), every log record (the server's log
formatter) and every audit record (whose only free text is an already masked error). Texts that
are *cut* before they can be masked (a stderr ring buffer, a stderr line cut for the log) are masked
with ``cut_front`` / ``cut_back``, which also hide the part of a secret left at the cut.

What counts as a secret (``docs/decisions/0009`` has the reasons): everything the user configured
(``env`` and ``headers`` values, ``args``, the URL of an HTTP server) unless its shape proves it
harmless: shorter than :data:`MIN_SECRET_CHARS`, a file path, a number or version, a plain word,
or text with punctuation no token holds (code, prose). A value *marked* as secret by where it
sits (after an option or in a variable whose name says key, token, password...; a URL's password;
a query, path or fragment parameter named so, also percent-encoded, in a word without a
scheme or behind fullwidth separators; an ASP.NET cookieless ticket) is masked whatever its
shape, paths excepted (but for their parameters named so). Structured values are taken
apart: ``--opt=value``, ``NAME=value``, ``Name: value``, URLs (user info, query values, path
segments and their ``;name=value`` parameters, fragment parameters) and words of a multi-word
value are each judged, and a value holding a secret part is masked whole too.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from bridge_core.servers import ServerSpec

__all__ = [
    "COOKIELESS_PATH",
    "MASK",
    "MIN_SECRET_CHARS",
    "Redactor",
    "configured_secrets",
    "entry_secrets",
    "is_secret_name",
    "secrets_in_value",
]

MASK = "***"
MIN_SECRET_CHARS = 6
"""Shorter values (``1``, ``true``, ``info``, ``UTC``) are settings, not secrets: masking them
would garble every text that happens to contain them."""
MIN_CUT_PART = 3
"""At a cut, a secret's end (or start) of at least this many characters is masked; shorter
pieces are left, or ordinary text next to every cut would be garbled."""
_MAX_DEPTH = 64
"""Deeper JSON is not walked: the wire encoder refuses anything past 32 levels anyway."""

_NAME_PARTS = (
    "key",
    "token",
    "secret",
    "pass",
    "pwd",
    "auth",
    "cred",
    "cookie",
    "session",
    "sessid",  # PHPSESSID
    "signature",
    "bearer",
    "private",
    "jwt",
    "dsn",
    "cert",
)
_NAME_WORDS = frozenset({"pw", "pin", "sig", "sid", "otp"})
_NAME_SPLIT = re.compile(r"[^a-z0-9]+")

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
COOKIELESS_PATH = re.compile(r"\((?:[A-Za-z]\([^()]*\))+\)")
"""A path segment of ASP.NET's cookieless session and auth tickets:
``/(S(<session>)F(<ticket>))/``."""
_COOKIELESS_VALUE = re.compile(r"[A-Za-z]\((?P<value>[^()]*)\)")
_PATH = re.compile(r"(?:~|\.{1,2})?/|[A-Za-z]:[\\/]")
# ``NAME=value`` (docker -e, env files) or ``Name: value`` (mcp-remote --header).
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_][\w.-]*)(?:=(?!=)|:\s)\s*(?P<value>.+)", re.DOTALL)
_ENCLOSING = "\"'`()[]{}<>,;"
# What a token is made of (base64, base64url, hex, JWTs, ``sk-...``, ``ghp_...``); a value with
# other punctuation is code or prose.
_TOKEN = re.compile(r"[\w.~+/=:@-]+")
# Ports, addresses, versions, dates and durations: ``8080``, ``127.0.0.1:80``, ``v2.3.0``, ``30s``.
_NUMBER = re.compile(r"[+-]?v?\d{1,5}(?:[.:/,_-]\d{1,5})*[A-Za-z]{0,3}")
# Letters joined by separators: ``stdio``, ``Europe/Paris``, ``@scope/server-name``.
_WORD = re.compile(r"@?[^\W\d_]+(?:[._/@+-]+[^\W\d_]+)*[._/-]?")
# A pinned package or image: ``mcp-server-git==2025.1.1``, ``@scope/name@1.2``, ``image:v1.2``.
_PINNED = re.compile(r"(?P<name>.+?)(?:==|@|:)(?P<version>v?\d[\w.-]*)")
_LETTERS = re.compile(r"[^\W\d_]+")
# What separates a URL's (or a cookie's) parameters: a word holding one is judged in its parts.
_SEPARATORS = re.compile(r"[;,&?#]")
_MAX_WORD_RUN = 24
"""Longer runs of letters are not words (a letters-only random token)."""
_MAX_CASE_CHANGES = 4
"""``JavaScript`` changes case 3 times; random mixed-case letters change it about every other
letter."""


def is_secret_name(name: str) -> bool:
    """True when a variable, header, option or query parameter name says its value is secret
    (``GITHUB_TOKEN``, ``Authorization``, ``--api-key``, ``password``, ``X-Auth-PW``...)."""
    lowered = name.lower()
    if any(part in lowered for part in _NAME_PARTS):
        return True
    return any(word in _NAME_WORDS for word in _NAME_SPLIT.split(lowered))


def configured_secrets(spec: ServerSpec) -> set[str]:
    """Every secret string in one server's definition (see the module docstring)."""
    found: set[str] = set()
    for name, value in (*spec.env.items(), *spec.headers.items()):
        _collect(value, found, marked=is_secret_name(name))
    _collect_args(spec.args, found)
    if spec.url:
        _collect(spec.url, found, marked=False)
    return found


def entry_secrets(entry: Mapping[str, Any]) -> set[str]:
    """Every secret string in one server entry as a config file holds it, before validation and
    in any client's dialect (``serverUrl``, ``httpUrl``, ``http_headers``, nested tables): its
    ``args`` judged as :func:`configured_secrets` judges them, every other string by the name of
    the field or key it sits under (``"GITHUB_TOKEN": ...`` is marked, ``"url": ...`` is not)."""
    found: set[str] = set()
    args = entry.get("args")
    if isinstance(args, list):
        _collect_args((str(a) for a in args if isinstance(a, str | int | float)), found)

    def walk(name: str, value: object, depth: int) -> None:
        if isinstance(value, str):
            _collect(value, found, marked=is_secret_name(name))
        elif isinstance(value, Mapping) and depth < _MAX_DEPTH:
            for key, item in value.items():
                walk(str(key), item, depth + 1)
        elif isinstance(value, list) and depth < _MAX_DEPTH:
            for item in value:
                walk(name, item, depth + 1)

    for key, value in entry.items():
        if key != "args":
            walk(str(key), value, 0)
    return found


def secrets_in_value(value: str, *, marked: bool) -> set[str]:
    """The secrets in one configured value outside a server definition (an OTLP endpoint, an
    exporter header), judged as :func:`configured_secrets` judges a server's; ``marked``: where
    the value sits says it is secret (a header value), so it is one whatever its shape."""
    found: set[str] = set()
    _collect(value, found, marked=marked)
    return found


_GLUED = re.compile(r"-[A-Za-z][^-=\s]\S*")
"""A short option with its value glued on (``-p<value>``), not a long option (``--name``)."""
GLUED_TOKEN_CHARS = 12
"""A value glued to a one-letter option is judged only from this length: shorter ones are far
more often the option's setting (``-Xmx512m``, ``-O2``) than a token, which is longer."""


def _collect_args(args: Iterable[str], found: set[str]) -> None:
    option: str | None = None  # the option the next argument may be the value of
    for arg in args:
        if arg.startswith("-") and not _NUMBER.fullmatch(arg):
            name, equals, value = arg.partition("=")
            if equals:
                _collect(value, found, marked=is_secret_name(name))
                option = None
            elif _GLUED.fullmatch(arg) and len(arg) - 2 >= GLUED_TOKEN_CHARS:
                # ``-tghp_...``, ``-psk-live-...``: a one-letter option with a token glued on
                # (getopt's form); the value is judged by its shape, the letter names nothing.
                _collect(arg[2:], found, marked=False)
                option = name
            else:
                option = name
            continue
        # ``--token sk-...``: a value after an option named so is a secret whatever its shape.
        _collect(arg, found, marked=option is not None and is_secret_name(option))
        option = None


def _collect(value: str, found: set[str], *, marked: bool) -> bool:
    """Add the secrets in ``value`` to ``found``; True when it held any (it is then added whole)."""
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS:
        return False
    if _PATH.match(value):
        # A path is no secret, but a URL's path in a query value (``?next=/app;sid=<token>``)
        # carries its parameters: those named secret are.
        held = ";" in value and _collect_named(re.split(r"[;/]", value), found)
        if held:
            found.add(value)
        return held
    if value[0] in "{[" and (decoded := _json(value)) is not None:
        # ``--config '{"apiKey": "sk-..."}'``: JSON judged by its keys, as an entry is.
        held = _collect_json(decoded, found, marked=marked, depth=0)
    elif _URL.match(value):
        held = _collect_url(value, found)
    elif assignment := _ASSIGNMENT.fullmatch(value):
        held = _collect(
            assignment["value"], found, marked=marked or is_secret_name(assignment["name"])
        )
    elif len(words := value.split()) > 1:
        # ``Bearer <token>``, ``Basic <base64>``: in a marked value the last word is the secret.
        # In prose or a script (``sh -c``) each word is judged without its quotes or brackets.
        held = False
        for index, word in enumerate(words):
            word = word.strip(_ENCLOSING)
            held |= _collect(word, found, marked=marked and index == len(words) - 1)
    else:
        held = marked or not _harmless(value)
        # Percent-encoded once or twice (``host/app%3Bjsessionid%3D<token>``), as in a URL.
        normal = unicodedata.normalize("NFKC", unquote(unquote(value)))
        if not held and (_SEPARATORS.search(normal) or "=" in normal):
            # ``host/app;jsessionid=<token>`` without a scheme, a query value holding
            # ``;token=...``, a fullwidth semicolon (U+FF1B): the separators made the word
            # harmless whole. Its ``name=value`` parts named secret are secrets; the other
            # parts are left (``DEBUG=app:*,-app:noise`` is a setting, not a token per part).
            held = _collect_named(_SEPARATORS.split(normal), found)
    if held:
        found.add(value)
    return held


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _collect_json(value: object, found: set[str], *, marked: bool, depth: int) -> bool:
    if isinstance(value, str):
        return _collect(value, found, marked=marked)
    held = False
    if isinstance(value, dict) and depth < _MAX_DEPTH:
        for key, item in value.items():
            held |= _collect_json(
                item, found, marked=marked or is_secret_name(str(key)), depth=depth + 1
            )
    elif isinstance(value, list) and depth < _MAX_DEPTH:
        for item in value:
            held |= _collect_json(item, found, marked=marked, depth=depth + 1)
    return held


def _collect_url(url: str, found: set[str]) -> bool:
    try:
        parts = urlsplit(url)
        password, username = parts.password, parts.username
    except ValueError:  # e.g. an unbalanced IPv6 bracket: judged as a plain value
        held = not _harmless(url)
        return held
    held = False
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        # A password is a secret; so is a user name with no password (``https://<token>@host``).
        secret = password if password is not None else username
        for form in _forms(secret or ""):
            held |= _collect(form, found, marked=True)
        if held:
            found.update(_forms(userinfo))
    # ``;`` separates parameters too (older servers, ``?a=1;jsessionid=...``).
    for chunk in parts.query.split(";"):
        for name, value in parse_qsl(chunk):
            for form in _forms(value):
                held |= _collect(form, found, marked=is_secret_name(name))
    for segment in parts.path.split("/"):
        # Path parameters carry session tokens (``/app;jsessionid=<token>``): each judged by
        # its name, as a query value is; a segment holding one was harmless whole (``;``).
        # Percent-encoded (``app%3Bjsessionid%3D<token>``, or twice: ``%253B``), the
        # parameters are judged too, as often decoded as a server might.
        decoded = segment
        for _ in range(3):
            decoded = unquote(decoded)
        if ";" in decoded and ";" not in segment:
            held |= _collect_parameters(decoded.split(";")[1:], found)
        segment, *parameters = segment.split(";")
        for form in _forms(segment):
            if COOKIELESS_PATH.fullmatch(form):
                for ticket in _COOKIELESS_VALUE.finditer(form[1:-1]):
                    held |= _collect(ticket["value"], found, marked=True)
            else:
                held |= _collect(form, found, marked=False)
        held |= _collect_parameters(parameters, found)
    # A fragment can hold parameters too (``#access_token=...&state=...``, OAuth's implicit flow).
    held |= _collect_parameters(re.split(r"[&;]", parts.fragment), found)
    return held


def _collect_parameters(parameters: Iterable[str], found: set[str]) -> bool:
    """``name=value`` pieces of a URL: a value whose name says secret is one whatever its shape;
    a piece without a name is judged as a value."""
    held = False
    for parameter in parameters:
        name, equals, value = parameter.partition("=")
        if not equals:
            name, value = "", parameter
        for form in _forms(value):
            held |= _collect(form, found, marked=is_secret_name(unquote(name)))
    return held


def _collect_named(parameters: Iterable[str], found: set[str]) -> bool:
    """The values of ``name=value`` pieces whose name says secret (any shape, as marked)."""
    held = False
    for parameter in parameters:
        name, equals, value = parameter.partition("=")
        if equals and is_secret_name(unquote(name)):
            for form in _forms(value):
                held |= _collect(form, found, marked=True)
    return held


def _forms(text: str) -> set[str]:
    """``text`` as configured, decoded and encoded: a message may quote either."""
    return {text, unquote(text), quote(text, safe="")}


def _harmless(value: str) -> bool:
    """A single word whose shape proves it is no secret: a number or version, punctuation no
    token holds (``$HOME``, ``"%s"``, ``f(x)``), a pinned package, or a plain word."""
    if _NUMBER.fullmatch(value) or not _TOKEN.fullmatch(value):
        return True
    if (pinned := _PINNED.fullmatch(value)) and _NUMBER.fullmatch(pinned["version"]):
        return _harmless(pinned["name"])
    if not _WORD.fullmatch(value):
        return False
    for run in _LETTERS.findall(value):
        changes = sum(1 for a, b in itertools.pairwise(run) if a.isupper() != b.isupper())
        if len(run) > _MAX_WORD_RUN or changes > _MAX_CASE_CHANGES:
            return False
    return True


class Redactor:
    """Replaces every known secret with :data:`MASK`. Immutable; cheap when there are none."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {secret for secret in secrets if len(secret) >= MIN_SECRET_CHARS}
        # A secret holding another (``user:pw``, ``Bearer <token>``, a URL with a token) is
        # masked by masking the one it holds, which leaves its harmless rest readable; each
        # secret costs a pass over every text, so the fewer the better.
        minimal = [s for s in unique if not any(o != s and o in s for o in unique)]
        self.secrets: tuple[str, ...] = tuple(sorted(minimal, key=lambda s: (-len(s), s)))
        # The secrets as they appear inside a JSON dump, to test a whole value at once.
        self._escaped = tuple(json.dumps(s, ensure_ascii=False)[1:-1] for s in self.secrets)

    @classmethod
    def for_servers(cls, specs: Iterable[ServerSpec]) -> Redactor:
        """The redactor of every secret in these servers' definitions."""
        found: set[str] = set()
        for spec in specs:
            found |= configured_secrets(spec)
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str, *, cut_front: bool = False, cut_back: bool = False) -> str:
        """``text`` with every secret masked. ``cut_front``/``cut_back``: the text was cut there
        (from a longer one), so a secret's end at its start (or start at its end) is masked too."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        if cut_front:
            text = self._mask_front(text)
        if cut_back:
            text = self._mask_back(text)
        return text

    def value(self, value: Any) -> Any:
        """A JSON value with every string (map keys included) masked; returned as-is when no
        string held a secret (found with one C-speed pass per secret over its JSON dump)."""
        if not self.secrets:
            return value
        try:
            dumped = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return self._walk(value, 0)
        if not any(secret in dumped for secret in self._escaped):
            return value
        return self._walk(value, 0)

    def _walk(self, value: Any, _depth: int) -> Any:
        if _depth > _MAX_DEPTH:
            # Too deep to walk: masked whole if it holds a secret, never passed on as it is.
            try:
                dumped = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                return MASK
            return MASK if any(secret in dumped for secret in self._escaped) else value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(k) if isinstance(k, str) else k: self._walk(v, _depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._walk(item, _depth + 1) for item in value]
        return value

    def _mask_front(self, text: str) -> str:
        ends = (secret[-size:] for secret in self.secrets for size in range(1, len(secret)))
        size = max((len(end) for end in ends if text.startswith(end)), default=0)
        return MASK + text[size:] if size >= MIN_CUT_PART else text

    def _mask_back(self, text: str) -> str:
        starts = (secret[:size] for secret in self.secrets for size in range(1, len(secret)))
        size = max((len(start) for start in starts if text.endswith(start)), default=0)
        return text[: len(text) - size] + MASK if size >= MIN_CUT_PART else text
