"""Framing a benchmark from a hypothesis in words (``benchmark-agent plan NAME "..."``).

The treatment variable is the provenance-manifest param the hypothesis names (the parts of its
name, ``lora`` and ``rank`` of ``train.lora_rank``, found among the hypothesis's words; the
values it names for it break ties); its treatments are its default, the control, then the
values the hypothesis names for it (numbers for a number, words of its ``why`` or its example
treatments for a word). Every other param is a control at its default. Where the hypothesis
names no param, the recipe's example treatment is used and the frame says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark_agent.config.models import ManifestEntry
from pytest_benchmark_agent.config.recipe import SCAFFOLD_PLACEHOLDER, params_to_set
from pytest_benchmark_agent.errors import BenchError

_WORD = re.compile(r"[a-z][a-z0-9]*|\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_NUMBER = re.compile(r"(?<![a-z\d.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![a-z\d.])")
#: Name parts too common to say which param a sentence is about.
_GENERIC = frozenset({"n", "k", "seed", "the", "of", "and"})


class FramingError(BenchError):
    """The hypothesis does not say what varies, or not what it is compared with."""


@dataclass(frozen=True)
class Frame:
    """What a hypothesis asks: the param that varies, its treatments (the control first) and
    the controls held at their defaults; ``how`` says where each came from. ``to_set`` are the
    other params, those with no default: written as the placeholder, for the user to name."""

    hypothesis: str
    variable: str
    treatments: list[Any]
    controls: dict[str, Any] = field(default_factory=dict)
    how: str = ""
    to_set: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        shown = ", ".join(map(str, self.treatments[1:]))
        controls = ", ".join(f"{k}={v}" for k, v in self.controls.items()) or "none"
        lines = [
            f"  hypothesis: {self.hypothesis}",
            f"  treatment:  {self.variable} = {self.treatments[0]} (control) against {shown}"
            f"  ({self.how})",
            f"  controls:   {controls} (each at its default)",
        ]
        if self.to_set:
            lines.append(
                f"  to set:     {', '.join(self.to_set)} (no default: written "
                f"{SCAFFOLD_PLACEHOLDER}, which gate 1 refuses until you give the value you use)"
            )
        return lines


def _words(text: str) -> set[str]:
    """The words of ``text`` and their plain stems ("queries" names "query", "merging" "merge")."""
    words = set(_WORD.findall(text.casefold()))
    stems = set()
    for word in words:
        for suffix, back in (("ies", "y"), ("es", ""), ("s", ""), ("ing", ""), ("ing", "e")):
            if word.endswith(suffix) and len(word) > len(suffix) + 2:
                stems.add(word[: -len(suffix)] + back)
    return words | stems


def _options(why: str) -> set[str]:
    """The values a ``why`` lists after its last colon ("...: none or optimize")."""
    _, colon, tail = why.casefold().rpartition(":")
    if not colon:
        return set()
    return {w.strip(" .") for w in re.split(r",|\bor\b", tail) if w.strip(" .")}


def _named_values(name: str, entry: ManifestEntry, text: str, example: Mapping[str, Any]) -> list:
    """Values the hypothesis names for param ``name`` other than its default, in its order."""
    default = entry.default
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        cast = int if isinstance(default, int) else float
        found = [cast(float(n)) for n in _NUMBER.findall(text.casefold())]
        found = [v for v in found if float(v).is_integer() or cast is float]
    else:
        known = _options(entry.why)
        if example.get("treatment_variable") == name:
            known |= {str(t).casefold() for t in example.get("treatments") or []}
        known.discard(str(default).casefold())
        found = [w for w in re.findall(r"[\w.@-]+", text.casefold()) if w in known]
    seen: list[Any] = []
    for value in found:
        if value != default and value not in seen:
            seen.append(value)
    return seen


def frame(
    hypothesis: str,
    manifest: Mapping[str, ManifestEntry],
    example: Mapping[str, Any],
    source: str,
) -> Frame:
    """The frame of ``hypothesis`` over ``manifest`` (of ``source``, a recipe or domain)."""
    words = _words(hypothesis)
    candidates = {
        name: entry
        for name, entry in manifest.items()
        if name != "seeds" and not entry.must_match and not entry.secret
    }
    scored = []
    for name, entry in candidates.items():
        parts = {p for p in re.split(r"[._\-]", name.casefold()) if p}
        parts = parts - _GENERIC if len(parts) > 1 else parts
        hits = len(parts & words)
        if hits:
            values = _named_values(name, entry, hypothesis, example)
            preferred = example.get("treatment_variable") == name
            scored.append((hits + (1 if values else 0), preferred, name, values))
    if scored:
        _, _, variable, values = max(scored, key=lambda s: (s[0], s[1]))
        entry = candidates[variable]
        how = "named in the hypothesis"
        treatments = [entry.default, *values] if entry.default is not None else values
        if len(treatments) < 2 and example.get("treatment_variable") == variable:
            treatments, how = list(example.get("treatments") or []), f"{source}'s example values"
        if len(treatments) < 2:
            raise FramingError(
                f"the hypothesis is about {variable} ({entry.why.rstrip('.')}) but names no "
                f"value to compare with its default {entry.default!r}; name the values in it, "
                f'e.g. "... with {variable} VALUE than with {entry.default}"'
            )
    elif example.get("treatment_variable") in candidates and example.get("treatments"):
        variable, treatments = example["treatment_variable"], list(example["treatments"])
        how = f"the hypothesis names none of its params: {source}'s example treatment"
    else:
        raise FramingError(
            f"the hypothesis names none of {source}'s params, so what varies is unknown; name "
            f"one of: {', '.join(candidates)}"
        )
    to_set = [n for n in params_to_set(manifest) if n != variable]
    controls = {
        n: e.default
        for n, e in manifest.items()
        if n not in ("seeds", variable) and e.default is not None
    }
    return Frame(hypothesis, variable, treatments, controls, how, to_set)
