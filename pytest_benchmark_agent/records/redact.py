"""Secret redaction for everything the engine writes: fingerprints, frozen configs, reports.

A value is replaced by ``<redacted>`` when its *name* says it is a secret (``API_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``apiKey`` ...) or when the *value* looks like one
whatever its name: a known token format (GitHub, OpenAI/Anthropic, Slack, AWS, Google,
Hugging Face, GitLab, JWT, a PEM private key) or a random-looking word: 32+ hex digits (a
git commit id too) or 24+ base64 characters mixing upper case, lower case and digits with high
entropy (a long CamelCase identifier with digits can be caught: that is the price). A URL
keeps its scheme, host and path but loses its credentials (``user:pass@``) and the values of
secret-named query parameters, so two runs against different hosts still differ visibly.
Redaction errs towards hiding: a false positive costs a readable value, a false negative a
leaked key. Values are never hashed: a hash of a short password is a leak too.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "<redacted>"

_SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "APIKEY",
        "AUTH",
        "COOKIE",
        "DSN",
        "PRIVATE",
        "SIGNATURE",
        "SIG",
        "SESSIONID",
        "BEARER",
    }
)
_GLUED = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")  # PGPASSWORD, GITHUBTOKEN
_NOT_SECRETS = frozenset({"PWD", "OLDPWD"})  # the shell's working directories

_TOKEN_FORMATS = re.compile(
    r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}|\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bAIza[0-9A-Za-z_\-]{35}|\bhf_[A-Za-z0-9]{30,}|\bglpat-[A-Za-z0-9_\-]{20,}"
    r"|\bnpm_[A-Za-z0-9]{36}|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\."
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|\bBearer\s+\S{16,})"
)
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_B64 = re.compile(r"[A-Za-z0-9+/_\-]{24,}={0,2}")
_WORD_SPLIT = re.compile(r"[\s,;:=\"'()\[\]{}<>|]+")
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")


def _name_parts(name: str) -> list[str]:
    """``awsSecretAccessKey`` and ``AWS_SECRET_ACCESS_KEY`` both give AWS, SECRET, ACCESS, KEY."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [part for part in re.split(r"[^A-Za-z0-9]+", spaced.upper()) if part]


def is_secret_name(name: str) -> bool:
    """Whether a variable or key called ``name`` holds a secret by its name alone."""
    if name.upper() in _NOT_SECRETS:
        return False
    parts = _name_parts(name)
    return bool(parts) and (
        any(part in _SECRET_WORDS or part.endswith(_GLUED) for part in parts)
        or parts[-1] in {"KEY", "KEYS"}
    )


def _entropy(word: str) -> float:
    counts = Counter(word)
    return -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())


def _random_looking(word: str) -> bool:
    """A long hex digest or base64 blob: random bytes, not a word, a path or a version."""
    if _HEX.fullmatch(word):
        return True
    if not _B64.fullmatch(word) or word.startswith(("/", ".", "~")):
        return False
    classes = sum(bool(re.search(c, word)) for c in ("[a-z]", "[A-Z]", "[0-9]"))
    return classes == 3 and _entropy(word) >= 3.8


def looks_secret(value: str) -> bool:
    """Whether a value is a secret whatever its name."""
    if _TOKEN_FORMATS.search(value):
        return True
    return any(_random_looking(word) for word in _WORD_SPLIT.split(value) if len(word) >= 24)


def _strip_url(url: str) -> str:
    """A URL without its userinfo's password and without secret-named query values."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
        netloc = f"{REDACTED}@{host or ''}" + (f":{port}" if port else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(k) or looks_secret(v) for k, v in pairs):
            query = urlencode(
                [(k, REDACTED if is_secret_name(k) or looks_secret(v) else v) for k, v in pairs],
                safe="<>",
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_value(name: str, value: Any) -> Any:
    """``value`` as safe to write under ``name``: itself, a URL stripped of secrets, or
    ``<redacted>``. None and empty strings pass (that a secret is unset is not a secret)."""
    if value is None or value == "":
        return value
    if is_secret_name(name):
        return REDACTED
    if not isinstance(value, str):
        return value
    stripped = _URL.sub(lambda m: _strip_url(m.group(0)), value)
    without_urls = _URL.sub(" ", value)
    if looks_secret(without_urls) or _TOKEN_FORMATS.search(stripped):
        return REDACTED
    return stripped


def redact_mapping(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with every secret value redacted, nested mappings and lists too."""
    return {key: _redact_any(str(key), value) for key, value in data.items()}


def _redact_any(name: str, value: Any) -> Any:
    if isinstance(value, Mapping):
        return REDACTED if is_secret_name(name) and value else redact_mapping(value)
    if isinstance(value, (list, tuple)):
        return [_redact_any(name, item) for item in value]
    return redact_value(name, value)
