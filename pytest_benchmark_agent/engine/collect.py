"""Benchmark files as pytest collectors: trials become items, preps become session fixtures.

``BenchFile.collect`` validates the file (config models; its recipe merged in and its Python
domain compiled to stages; then gate 1: any problem is a collection error, pytest exit code 2),
builds the plan, registers one session-scoped fixture per prep signature (so ``--setup-show``
shows each prep built once and reused) and yields one ``BenchItem`` per trial, in the plan's
interleaved order.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import pytest

from pytest_benchmark_agent.domains.load import load_benchmark
from pytest_benchmark_agent.engine.execute import TrialNotPassed, interrupted_record
from pytest_benchmark_agent.engine.plan import PrepNode, TrialSpec, build_plan
from pytest_benchmark_agent.engine.preflight import gate_one
from pytest_benchmark_agent.engine.preps import PrepOutcome, obtain_prep
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records import recover
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.safetext import printable

if TYPE_CHECKING:
    from pytest_benchmark_agent.engine.session import BenchSession
    from pytest_benchmark_agent.records.run import BenchRun


class BenchFile(pytest.File):
    """A benchmark YAML file."""

    def collect(self):
        bench: BenchSession = self.config.stash[SESSION_KEY]
        config = load_benchmark(self.path, bench.overrides)
        points = bench.round_points if config.search_space is not None else None
        comparing = bool(self.config.getoption("bench_against"))
        if points is None:  # a tuning round's blocks are the tuner's
            config = bench.design.apply(config, self.path, revisions=comparing)
        gate_one(config, self.path, tuning=points is not None, home=bench.home, revisions=comparing)
        revisions, against_config = bench.against(self.path, config)
        plan = build_plan(config, self.path, points, revisions, against_config)
        caveat = bench.preflight(plan)
        run = bench.new_run(plan)
        if bench.worker_id is None and recover.taken(run.dir):  # claimed atomically at its start
            raise recover.RunTaken(run.dir)
        self.add_marker(pytest.mark.bench)  # on the file: every trial carries it, at no cost
        if caveat:
            run.caveats.append(f"preflight: {caveat}")
        for node in plan.preps.values():
            self._register_prep(bench, run, node)
        # Trials needing the same preps share one fixture resolution: planning 10,000 trials
        # must not cost 10,000 fixture-closure computations.
        shared: dict[tuple[str, ...], tuple[Any, Any]] = {}
        for spec in plan.trials:
            needed = tuple(node.fixture_name for node in spec.needs)
            callobj, info = shared.get(needed, (_needs(needed), None))
            item = BenchItem.from_parent(
                self,
                name=run.trial_id(spec),
                callobj=callobj,
                fixtureinfo=info,
                spec=spec,
                run=run,
                bench=bench,
            )
            shared.setdefault(needed, (callobj, item._fixtureinfo))
            yield item

    def _register_prep(self, bench: BenchSession, run: BenchRun, node: PrepNode) -> None:
        needed = [dep.fixture_name for dep in node.needs]

        def build_or_reuse(**upstream: PrepOutcome) -> PrepOutcome:
            return obtain_prep(run, bench.stage_context, node, [upstream[name] for name in needed])

        build_or_reuse.__name__ = node.fixture_name
        build_or_reuse.__signature__ = _signature(needed)  # type: ignore[attr-defined]
        # pytest's public imperative fixture API (9.1+): preps are real session-scoped
        # fixtures, visible to this benchmark file's trials only.
        pytest.register_fixture(
            name=node.fixture_name, func=build_or_reuse, node=self, scope="session"
        )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, BenchError):
            # the command and stderr may hold a secret, and a stage's escape sequences
            return printable(redact.stage_text(str(excinfo.value)))
        return super().repr_failure(excinfo)


class BenchItem(pytest.Function):
    """One trial: the measure stage for one treatment, replicate and seed."""

    def __init__(self, *, spec: TrialSpec, run: BenchRun, bench: BenchSession, **kwargs: Any):
        super().__init__(**kwargs)
        # pytest 9.2 keys --lf/--ff by a structured id that parses "[...]" off a stored nodeid
        # but not off a child's name: the id is reparsed so a trial matches its last failure.
        node_id = getattr(self, "_id", None)
        if hasattr(node_id, "parse"):
            self._id = type(node_id).parse(self.nodeid)
        self.spec = spec
        self.run = run
        self.bench = bench

    def runtest(self) -> None:
        """Run the trial's measure stage with the prep outcomes its fixtures provided."""
        preps = [self.funcargs[node.fixture_name] for node in self.spec.needs]
        try:
            record = self.bench.counted.trial(self, preps)
        except TrialNotPassed as exc:
            self.bench.finish_trial(self.run, exc.record)
            raise exc.cause from None
        except KeyboardInterrupt as exc:
            record = interrupted_record(exc)
            if record is None:
                raise
            self.bench.finish_trial(self.run, record)
            # pytest's banner names the exception's class: the user's, not the engine's carrier
            raise KeyboardInterrupt from None
        self.bench.finish_trial(self.run, record)

    def reportinfo(self):
        return self.path, None, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]):  # type: ignore[override]
        if isinstance(excinfo.value, BenchError):
            # the command and stderr may hold a secret, and a stage's escape sequences
            return printable(redact.stage_text(str(excinfo.value)))
        return super().repr_failure(excinfo)


def select_by_keyword(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``-k`` with trials among the items: inside a trial id's brackets a word matches a whole
    token (the treatment as written, ``rep<k>``, ``seed<s>``, the variable), so ``-k 1``
    picks treatment 1 and not ``rep1``; a word holding a bracket matches any part of the id, and
    the file and stage names match on substrings as pytest's ``-k`` does. Every item is
    selected here with pytest's own grammar and errors, then pytest's pass is turned off."""
    expression = config.option.keyword.lstrip()
    if not expression or not any(isinstance(item, BenchItem) for item in items):
        return
    # pytest's -k parser and matcher: no public API exposes them (pytest>=9.1,<10 pins them).
    from _pytest.mark import KeywordMatcher, _parse_expression

    compiled = _parse_expression(expression, "Wrong expression passed to '-k'")
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        matcher = (
            _TrialWords(item) if isinstance(item, BenchItem) else KeywordMatcher.from_item(item)
        )
        (kept if compiled.evaluate(matcher) else dropped).append(item)
    config.option.keyword = ""
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class _TrialWords:
    """What ``-k`` matches a trial on (see :func:`select_by_keyword`)."""

    def __init__(self, item: BenchItem):
        spec = item.spec
        self.id = item.name.lower()
        self.names = {item.name.partition("[")[0].lower()}
        for node in item.listchain()[:-1]:  # as pytest: not the session, nor the root folder
            root = isinstance(node, pytest.Directory) and isinstance(node.parent, pytest.Session)
            if not (isinstance(node, pytest.Session) or root):
                self.names.add(node.name.lower())
        self.names.update(name.lower() for name in item.listextrakeywords())
        self.names.update(mark.name.lower() for mark in item.iter_markers())
        words = [spec.treatment_label, f"rep{spec.replicate}"]
        if spec.seed is not None:
            words.append(f"seed{spec.seed}")
        if item.run.variable:
            words.append(item.run.variable)
        self.words = {word.lower() for word in words}

    def __call__(self, subname: str, /, **kwargs: object) -> bool:
        if kwargs:
            raise pytest.UsageError("Keyword expressions do not support call parameters.")
        word = subname.lower()
        if "[" in word or "]" in word:
            return word in self.id
        return word in self.words or any(word in name for name in self.names)


def _needs(names: tuple[str, ...]):
    """The item's function object: it only names the prep fixtures a trial requests (its
    signature); ``BenchItem.runtest`` runs the trial itself."""

    def trial(**preps: PrepOutcome) -> None:
        raise NotImplementedError("BenchItem.runtest runs trials")  # pragma: no cover

    trial.__signature__ = _signature(list(names))  # type: ignore[attr-defined]
    return trial


def _signature(names: list[str]) -> inspect.Signature:
    return inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    )


SESSION_KEY = pytest.StashKey["BenchSession"]()
