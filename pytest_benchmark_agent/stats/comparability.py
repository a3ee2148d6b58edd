"""When a comparison is refused or a guard fails, whatever the statistics would say.

These rules need no numpy, so :mod:`.judge` applies them to a run with nothing to compare (a
cached session measuring one treatment, a smoke run below ``min_replicates``) without importing
:mod:`.analysis`, whose numpy import costs more than such a session's whole budget; the
analysis applies the same functions, so both give the same records in the same words.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

DIRECTIONS = ("lower", "higher", "equal")

#: A value a comparison uses: a finite float, or for ``direction: equal`` an int or a str too.
Sample = float | int | str


class Refusal(StrEnum):
    """Why a comparison was refused, as the tag and the CI gate read it (never from its words).

    * ``too_small``: too little data for a verdict (too few replicates, seeds or units): the
      run is small, not broken; it stays EXPLORATORY.
    * ``finding``: a finding about the treatment (it failed a guard, hosts disagree on its
      direction): reported, and no failure of the run.
    * ``failed``: the comparison itself failed (a side without samples, an effect that cannot
      be defined): a failed gate, UNRELIABLE.
    """

    TOO_SMALL = "too_small"
    FINDING = "finding"
    FAILED = "failed"


@dataclass(frozen=True)
class Refused:
    """A refusal before any test: its words (the report's) and its kind (the tag's)."""

    kind: Refusal
    text: str


class MetricRule(Protocol):
    """The attributes of a metric's config that the analysis reads."""

    direction: str
    primary: bool
    guard: bool
    floor: float | None
    ceiling: float | None
    noise_threshold: float
    min_replicates: int


@dataclass(frozen=True)
class Verdict:
    """The verdict on one metric for one treatment against the control."""

    verdict: str
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p: float | None = None
    p_holm: float | None = None
    reason: str | None = None
    n: tuple[int, int] = (0, 0)
    mde: float | None = None
    test: str | None = None
    design: str | None = None
    units: int = 0
    level: float | None = None
    median_ratio: float | None = None
    #: The kind of refusal of a ``not_comparable`` verdict (None otherwise).
    refused: Refusal | None = None
    #: Every other field of the record (``against`` of a comparison across runs, ``across`` of
    #: a recorded baseline's spread), kept as read so that writing it back loses nothing.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python mapping for results.yaml (lists, floats, no numpy scalars)."""
        return {
            "verdict": self.verdict,
            "ratio": self.ratio,
            "ci": list(self.ci) if self.ci is not None else None,
            "p": self.p,
            "p_holm": self.p_holm,
            "reason": self.reason,
            "n": list(self.n),
            "mde": self.mde,
            "test": self.test,
            "design": self.design,
            "units": self.units,
            "level": self.level,
            "median_ratio": self.median_ratio,
            "refused": None if self.refused is None else self.refused.value,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Verdict:
        """A verdict record read back (docs/benchmark/FORMAT.md, "A verdict record"); a key
        this version does not name (``against`` across runs) is kept in ``extra``."""
        ci, n, refused = record.get("ci"), record.get("n"), record.get("refused")
        return cls(
            verdict=record["verdict"],
            ratio=record.get("ratio"),
            ci=(ci[0], ci[1]) if ci else None,
            p=record.get("p"),
            p_holm=record.get("p_holm"),
            reason=record.get("reason"),
            n=(n[0], n[1]) if n else (0, 0),
            mde=record.get("mde"),
            test=record.get("test"),
            design=record.get("design"),
            units=record.get("units") or 0,
            level=record.get("level"),
            median_ratio=record.get("median_ratio"),
            refused=Refusal(refused) if refused else None,
            extra={k: v for k, v in record.items() if k not in _VERDICT_FIELDS},
        )

    @property
    def improved(self) -> bool:
        return self.verdict == "improved"

    @property
    def regressed(self) -> bool:
        return self.verdict == "regressed"

    @property
    def no_change(self) -> bool:
        return self.verdict == "no_change"

    @property
    def not_comparable(self) -> bool:
        return self.verdict == "not_comparable"

    @property
    def word(self) -> str:
        """The verdict as printed: a ``no_change`` whose interval lies wholly above or below 1
        is ``changed`` (a change is shown, its size not beyond the noise threshold), never
        "no change"; the record keeps ``no_change`` for the rules that read it."""
        ci = self.ci
        if self.no_change and ci and None not in ci and (ci[0] > 1 or ci[1] < 1):
            return "changed"
        return self.verdict

    @property
    def interval(self) -> tuple[float, float] | None:
        """The ratio's 95% interval (``ci``)."""
        return self.ci


def is_guarded(spec: MetricRule) -> bool:
    """Whether a metric guards the comparison: ``guard: true``, a ``floor`` or a ``ceiling``
    (a treatment failing it cannot be called improved on a primary metric)."""
    return spec.guard or spec.floor is not None or spec.ceiling is not None


def usable(spec: MetricRule, value: Any) -> Sample | None:
    """The value of a trial record that a comparison of ``spec``'s metric uses, or None when it
    is ignored. ``equal`` metrics keep an int (of any size) or a str exactly as recorded, and a
    finite float (an older record's); the others take a finite float and never a str."""
    if isinstance(value, bool):
        return None
    if spec.direction == "equal" and isinstance(value, (int, str)):
        return value
    if isinstance(value, str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def ignored_caveats(metric: str, ignored: Sequence[Any]) -> list[str]:
    """The caveats for the values of ``metric`` that :func:`usable` ignored."""
    non_finite = sum(1 for value in ignored if isinstance(value, float))
    caveats = [f"{metric}: {non_finite} non-finite value(s) ignored"] if non_finite else []
    if len(ignored) > non_finite:
        caveats.append(
            f"{metric}: {len(ignored) - non_finite} value(s) that are not numbers "
            "ignored (a value compared exactly needs direction: equal)"
        )
    return caveats


def refusal(spec: MetricRule, n: tuple[int, int]) -> Refused | None:
    """Why a comparison of ``n`` = (control, treatment) finite samples is refused before any
    test, or None: a side without samples, or (except for ``equal`` metrics, compared from one
    sample) fewer than ``min_replicates``."""
    if not min(n):
        return Refused(
            Refusal.FAILED, f"no samples for the {'control' if not n[0] else 'treatment'}"
        )
    if spec.direction != "equal" and min(n) < spec.min_replicates:
        return Refused(
            Refusal.TOO_SMALL, f"too few replicates (n={min(n)}, needed {spec.min_replicates})"
        )
    return None


def guard_failures(
    metric: str, spec: MetricRule, values: Sequence[Sample], compared: Verdict | None
) -> list[str]:
    """Why a treatment fails guard ``metric``: no samples, its median past the floor or ceiling,
    and, for a ``guard`` metric with its verdict against the control (``compared``; None for the
    control itself), a regression or a comparison that could not be made."""
    if not values:
        return [f"guard {metric} has no samples"]
    failures = []
    if spec.floor is not None or spec.ceiling is not None:  # gate 1: never on an equal metric
        median = statistics.median(float(value) for value in values)
        if spec.floor is not None and median < spec.floor:
            failures.append(f"guard {metric} median {median:g} is below its floor {spec.floor:g}")
        if spec.ceiling is not None and median > spec.ceiling:
            failures.append(
                f"guard {metric} median {median:g} is above its ceiling {spec.ceiling:g}"
            )
    if compared is None or not spec.guard:
        return failures
    if compared.verdict == "regressed":
        detail = compared.reason or f"ratio {compared.ratio:.4g}"
        failures.append(f"guard {metric} regressed ({detail})")
    elif compared.verdict == "not_comparable":
        failures.append(f"guard {metric} could not be checked ({compared.reason})")
    return failures


#: The fields :class:`Verdict` names; any other key of a verdict record goes to its ``extra``.
_VERDICT_FIELDS = frozenset(Verdict.__dataclass_fields__) - {"extra"}
