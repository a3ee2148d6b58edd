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

Beyond the fingerprint, a benchmark's own secrets (:func:`secret_values`: params and stage
``env:`` entries named like secrets, params declared ``secret: true`` in ``manifest:``, the
userinfo of URL values) are registered when it is loaded (:func:`register`), and every
record writer passes what it writes through :func:`scrub` (structured data) or
:func:`scrub_text` (rendered text): one seam, so a new writer cannot forget a field. Where a
secret must still tell two values apart (a cache signature), :func:`keyed` gives an HMAC under a
random key kept 0600 in the data home (:func:`use_home_key`), never the value or a plain hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import secrets
import shlex
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_benchmark_agent.util.placeholders import as_text, names_in

if TYPE_CHECKING:
    from pytest_benchmark_agent.config.models import BenchmarkConfig

REDACTED = "<redacted>"
#: A registered secret shorter than this is redacted where it is a value of its own (its param,
#: its env entry) but not searched inside longer text, where it would erase ordinary words.
MIN_SCRUBBED = 6
#: The file in the data home holding the key of :func:`keyed` (mode 0600).
KEY_FILE = ".signing_key"

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
    r"|\bnpm_[A-Za-z0-9]{36}|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|\bBearer\s+\S{16,})"
)
#: A literal that every match of :data:`_TOKEN_FORMATS` holds: a text holding none of them is
#: passed without running the regex, which scans a stage's output at a few MB/s.
_TOKEN_LITERALS = (
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk-", "k_live_", "k_test_", "xox",
    "AKIA", "ASIA", "AIza", "hf_", "glpat-", "npm_", "eyJ", "-----BEGIN ", "Bearer",
)  # fmt: skip
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


_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)([^\s/?#@\"'<>]+)@")


def secret_params(config: BenchmarkConfig) -> list[str]:
    """The params whose values are secrets: named like one (:func:`is_secret_name`: a word
    part such as ``api_key``, ``DB_PASSWORD``, ``authToken``; not ``keyword`` or ``author``),
    declared ``secret: true`` in ``manifest:``, or placed into a secret-named ``env:`` entry.
    A true/false value is never a secret."""
    declared = {name for name, entry in config.manifest.items() if entry.secret}
    declared |= {
        name
        for stage in config.stages
        for key, text in stage.env.items()
        if is_secret_name(key)
        for name in names_in(text)
    }
    return [
        name
        for name, value in config.params.items()
        if not isinstance(value, bool) and (name in declared or is_secret_name(name))
    ]


def keyed_params(config: BenchmarkConfig) -> frozenset[str]:
    """The params a cache signature holds only as :func:`keyed`: the secret ones and those
    whose value holds a URL with userinfo."""
    with_userinfo = {n for n, v in config.params.items() if _USERINFO.search(as_text(v))}
    return frozenset(secret_params(config)) | with_userinfo


def keyed_env(name: str, text: str) -> str:
    """A stage's ``env:`` entry as a cache signature holds it: :func:`keyed` when secret."""
    return keyed(text) if text and (is_secret_name(name) or _USERINFO.search(text)) else text


def secret_values(config: BenchmarkConfig) -> dict[str, str]:
    """Each secret of ``config`` by its name: secret params (and the treatments of one named
    as the treatment variable) and secret-named stage ``env:`` entries (their text), and the
    userinfo of every URL in any param or env value."""
    names = secret_params(config)
    found: dict[str, str] = {name: as_text(config.params[name]) for name in names}
    tv = config.treatment_variable
    if isinstance(tv, str) and tv in names:  # refused by gate 1, whose message quotes them
        for index, value in enumerate(config.treatments or []):
            value = value.get(tv) if isinstance(value, dict) else value
            found[f"treatment {index} of {tv}"] = as_text(value)
    for stage in config.stages:
        found.update({k: v for k, v in stage.env.items() if is_secret_name(k) and not names_in(v)})
    for name in config.env_vars:  # recorded by name; every stage inherits its value
        if is_secret_name(name) and os.environ.get(name):
            found[f"env_vars {name}"] = os.environ[name]
    texts = [as_text(v) for v in config.params.values()]
    texts += [v for stage in config.stages for v in stage.env.values()]
    for text in texts:
        for match in _USERINFO.finditer(text):
            found.setdefault(f"userinfo of {match.group(1)}", match.group(2))
    return {name: text for name, text in found.items() if text}


#: The secrets registered in this process: name -> its values; every value's searched forms;
#: and the probes whose absence from a record's JSON text proves it holds none of them.
_BY_NAME: dict[str, set[str]] = {}
_FORMS: set[str] = set()
_PROBES: set[str] = set()


def forget() -> None:
    """Start a session with no secret registered: a value stays hidden for the rest of the
    session that learnt it, and never leaks into another session run in the same process
    (``pytester``'s in-process runs), where an ordinary word would be redacted."""
    _BY_NAME.clear()
    _FORMS.clear()
    _PROBES.clear()


def register(config: BenchmarkConfig) -> None:
    """Make every writer of this process redact ``config``'s secrets (kept until the session
    ends, :func:`forget`: a value once known to be secret stays hidden)."""
    for name, text in secret_values(config).items():
        if text == REDACTED:  # a recorded config's: nothing left to hide
            continue
        _BY_NAME.setdefault(name, set()).add(text)
        _PROBES.add(json.dumps(name, ensure_ascii=False) + ":")
        if len(text) >= MIN_SCRUBBED:
            forms = {text, shlex.quote(text)}
            _FORMS.update(forms)
            _PROBES.update(json.dumps(form, ensure_ascii=False)[1:-1] for form in forms)


def scrub_text(text: str) -> str:
    """``text`` with every registered secret (raw or shell-quoted) and every URL's userinfo
    replaced by ``<redacted>``."""
    if "://" in text and "@" in text:
        text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    for form in sorted((f for f in _FORMS if f in text), key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text


def stage_text(text: str) -> str:
    """Text that came from a stage (each line of its stdout and stderr as the pipes are read,
    by engine/stage_output; a metric's value from its file; a failure's text) as it may leave
    the stage for any file, export or terminal:
    every registered secret (:func:`scrub_text`) and every known token format redacted. The
    one seam for a stage's text: a stage can print anything its environment holds."""
    text = scrub_text(text)
    if any(literal in text for literal in _TOKEN_LITERALS):
        text = _TOKEN_FORMATS.sub(REDACTED, text)
    return text


def scrub(data: Any) -> Any:
    """``data`` (a record: mappings, lists, scalars) with every registered secret redacted:
    an entry whose key is a secret's name and whose value is that secret, and every secret
    inside a string. Unchanged parts are returned as they are (no copy); numbers and keys are
    never searched, so a record stays readable. A record whose JSON text holds no probe is
    returned at once: one pass in C instead of a walk of every value."""
    try:
        text = json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # keys that are not text, a cycle: walk it
        return _scrub(data)
    if ("://" in text and "@" in text) or any(probe in text for probe in _PROBES):
        return _scrub(data)
    return data


def _scrub(data: Any) -> Any:
    if isinstance(data, str):
        return scrub_text(data)
    if isinstance(data, Mapping):
        out = {}
        changed = False
        for key, value in data.items():
            hidden = key in _BY_NAME and _text_of(value) in _BY_NAME[key]
            new = REDACTED if hidden else _scrub(value)
            changed = changed or new is not value
            out[key] = new
        return out if changed else data
    if isinstance(data, (list, tuple)):
        items = [_scrub(item) for item in data]
        return items if any(a is not b for a, b in zip(items, data, strict=True)) else data
    return data


def as_written(config: BenchmarkConfig) -> BenchmarkConfig:
    """``config`` as its records hold it, secrets ``<redacted>``: what a comparison of a live
    config with a recorded one reads (a baseline, a reproduction's identity, a plan's review),
    so a secret neither blocks a comparison nor is compared. ``config`` itself when it holds
    no secret."""
    register(config)
    data = config.model_dump()
    hidden = scrub(data)
    return config if hidden is data else type(config).model_validate(hidden)


def _text_of(value: Any) -> str | None:
    return None if isinstance(value, bool) or value is None else as_text(value)


#: The data home whose key :func:`keyed` uses ("home"), and that key once read ("key").
_KEY: dict[str, Any] = {}


def use_home_key(home: Path) -> None:
    """Make :func:`keyed` use the key of data home ``home`` (read, or made, on first use)."""
    _KEY.clear()
    _KEY["home"] = home


def keyed(text: str) -> str:
    """An HMAC-SHA256 of a secret under the data home's key (:func:`use_home_key`; without a
    home, a key of this process only), so nothing guessable is derived from the secret."""
    if "key" not in _KEY:
        home = _KEY.get("home")
        _KEY["key"] = _home_key(home) if home is not None else secrets.token_bytes(32)
    return "hmac:" + hmac.new(_KEY["key"], text.encode(), hashlib.sha256).hexdigest()


def _home_key(home: Path) -> bytes:
    """The random key in ``home``'s :data:`KEY_FILE` (mode 0600), made when missing; a key
    another session made first is never replaced."""
    path = home / KEY_FILE
    if not path.is_file():
        home.mkdir(parents=True, exist_ok=True)
        tmp = home / f".{KEY_FILE}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links: a rename, unless one appeared
            if not path.exists():
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return path.read_bytes()
