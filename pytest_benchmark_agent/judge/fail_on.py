"""What a CI gate may be told to fail on: one parser for ``--bench-fail-on`` and ``compare
--fail-on``, so both accept the same words and say the same thing about a bad one.

Kept apart from :mod:`.gate2` because the plugin parses the option at start-up, where loading
the judge would cost every ``pytest`` run, with or without ``--bench``.
"""

from __future__ import annotations

#: The outcomes a gate may fail on.
FAIL_ON = ("regression", "unjudged")


def fail_on_words(text: str, option: str) -> tuple[str, ...]:
    """``option``'s value (a comma list of :data:`FAIL_ON`), else ValueError saying so."""
    words = tuple(word.strip() for word in text.split(",") if word.strip())
    if not words or any(word not in FAIL_ON for word in words):
        raise ValueError(
            f"{text!r}: give a comma list of {', '.join(FAIL_ON)}, "
            f"e.g. {option}=regression,unjudged"
        )
    return words
