"""The pytest entry point (``pytest11: benchmark_agent``): options, collection, wiring.

Without ``--bench`` this module only adds its options and hook specifications: no benchmark
file is collected, no plugin object is registered, and nothing heavy is imported, so a normal
test suite pays nothing (and ``-p no:benchmark_agent`` removes even that).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from pytest_benchmark_agent import hookspecs
from pytest_benchmark_agent.util.safetext import run_id_option

BENCH_FILE_PATTERNS = ("bench*.yaml", "*.bench.yaml", "bench*.yml", "*.bench.yml")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchmark_agent", "benchmark sessions (pytest-benchmark-agent)")
    _add_run_options(group)
    _add_comparison_options(group)
    _add_design_options(group)
    _add_execution_options(group)
    for name, help_text, kind in INI_OPTIONS:
        parser.addini(name, help_text, type=kind, default=None)


def _add_run_options(group: pytest.OptionGroup) -> None:
    """What a session runs and where it records it: the switch, the data home, the run id."""
    group.addoption(
        "--bench",
        action="store_true",
        default=False,
        help="collect benchmark YAML files (bench*.yaml, *.bench.yaml, or any YAML "
        "path given) and run their trials",
    )
    group.addoption(
        "--bench-home",
        default=None,
        metavar="DIR",
        help="data directory for runs and the prep cache "
        "(default: $BENCHMARK_HOME or ./benchmark_data)",
    )
    group.addoption(
        "--bench-accept-risk",
        action="store_true",
        default=None,  # None: not given, so the ini option decides
        help="run even when declared resources fit with under 10%% headroom (recorded as a caveat)",
    )
    group.addoption(
        "--bench-run-id",
        default=None,
        type=run_id_option,  # a folder name inside the data home, else a usage error
        metavar="ID",
        help="use ID as the run id (one benchmark file per session): lets a caller "
        "know the run folder before the session starts (detached runs)",
    )
    group.addoption(
        "--bench-hash-seeds",
        default=None,
        type=_hash_seed_base,
        metavar="BASE",
        help="replay the Python hash seeds of a recorded counted run: the hash_seed_base of "
        "its results.yaml (default: each run draws its own, so a rerun's counts can differ)",
    )
    group.addoption(
        "--bench-round",
        default=None,
        metavar="FILE",
        help="run one tuning round: the search-space points listed in FILE (JSON), "
        "written by the tuner; each point is a treatment",
    )


def _add_comparison_options(group: pytest.OptionGroup) -> None:
    """What a session is compared with, and when its CI gate fails."""
    group.addoption(
        "--bench-baseline",
        default=None,
        metavar="REF",
        help="compare this session with a recorded run: a run id or unique prefix, "
        "'latest' (the newest finished run of this benchmark), or a git "
        "revision (main, HEAD~1, a sha: the newest run of that commit with a "
        "clean tree). It may differ in the treatment variable and the code only; "
        "a REF naming no run leaves the CI gate unjudged",
    )
    group.addoption(
        "--bench-against",
        default=None,
        metavar="REV",
        help="measure REV's code and the working tree's code in this one session: REV is "
        "checked out into a git worktree of its own, the two revisions are the treatments "
        "(REV the control), in interleaved blocks, judged by the in-run paired test; the "
        "CI gate reads that comparison. The tree must be clean (HEAD is the other side)",
    )
    group.addoption(
        "--bench-against-file",
        default="worktree",
        choices=("worktree", "revision"),
        help="with --bench-against: worktree (default): both revisions run the working "
        "tree's benchmark file; revision: each revision runs its own",
    )
    group.addoption(
        "--bench-fail-on",
        default=None,
        type=_fail_on,
        metavar="regression[,unjudged]",
        help="exit 1 when the CI gate fails. regression: a primary metric regressed "
        "beyond its fail_threshold against --bench-baseline, or a guard metric "
        "regressed (without a baseline: a primary metric regressed against the "
        "control); unjudged: nothing could be judged (no baseline found, not "
        "comparable, too few replicates)",
    )


def _add_design_options(group: pytest.OptionGroup) -> None:
    """What one session changes in every file's design: its blocks and its gate's threshold."""
    group.addoption(
        "--bench-replicates",
        default=None,
        type=_lazy("replicates_option"),
        metavar="N|MIN:MAX",
        help="replace the file's replicates for this session: N blocks, or MIN:MAX adding "
        "blocks until the verdicts (under --bench-against: the CI gate) can decide. Under "
        "--bench-against a file that declares no replicates runs 8:40 (3:40 when every "
        "primary metric is counted)",
    )
    group.addoption(
        "--bench-fail-threshold",
        action="append",
        default=[],
        type=_lazy("fail_threshold_option"),
        metavar="[METRIC=]X",
        help="how far a primary metric may regress before the CI gate fails, for this "
        "session (5%% or 0.05; METRIC=X for one metric); default: the file's fail_threshold, "
        "else 5%% (1%% for a counter)",
    )
    group.addoption(
        "--bench-bisect-midpoint",
        action="append",
        default=[],
        type=_lazy("midpoint_option"),
        metavar="METRIC=RATIO",
        help="set by benchmark-agent bisect for each step: the ratio to GOOD halfway to BAD; "
        "blocks are added until each primary interval lies wholly on one side of it",
    )


def _add_execution_options(group: pytest.OptionGroup) -> None:
    """How a session executes its trials: isolation, tuning, progress, warm-up, overrides."""
    group.addoption(
        "--bench-isolation",
        default=None,
        choices=("host", "none"),
        help="host (default): a measure stage runs alone on its host, preps share "
        "it; none: no isolation (the run is QUALIFIED)",
    )
    group.addoption(
        "--bench-tune",
        default=None,
        choices=("grid", "refine", "coordinate"),
        help="tune the tuning file given (search_space:, objective:): rounds of "
        "trials, each its own --bench session, moving only on improvements "
        "gate 2 supports",
    )
    group.addoption(
        "--bench-progress-every",
        type=float,
        default=None,
        metavar="SECONDS",
        help="off a terminal, a running stage's progress line (elapsed, peak memory, ETA) "
        "is printed and logged this often (default 30); on a terminal it redraws in place",
    )
    group.addoption(
        "--bench-warmup",
        type=_warmup_rounds,
        default=None,
        metavar="N",
        help="run every measure stage N times untimed per configuration before its first "
        "trial (a stage's own warmup: wins); recorded as warm-up rounds, never measured",
    )
    group.addoption(
        "--bench-set",
        action="append",
        default=[],
        metavar="PARAM=VALUE",
        help="override a declared param for this session (repeatable; the value "
        "is read as YAML, so 2000 is a number)",
    )


#: The ini options (``[tool.pytest.ini_options]`` or pytest.ini): one per ``--bench-*`` option
#: that is a project setting; the command line wins. ``--bench-run-id``, ``--bench-round`` and
#: ``--bench-tune`` name one session's run or action, so they have none.
INI_OPTIONS = (
    ("bench_home", "data directory for runs and the prep cache (relative: to the ini file)", None),
    ("bench_accept_risk", "like --bench-accept-risk", "bool"),
    ("bench_baseline", "like --bench-baseline REF", None),
    ("bench_fail_on", "like --bench-fail-on: regression, unjudged or both", None),
    ("bench_isolation", "like --bench-isolation: host (default) or none", None),
    ("bench_progress_every", "like --bench-progress-every SECONDS (default 30)", None),
    ("bench_set", "param overrides, one PARAM=VALUE a line (--bench-set wins)", "linelist"),
)
ISOLATIONS = ("host", "none")
DEFAULT_PROGRESS_EVERY_S = 30.0


def apply_ini(config: pytest.Config) -> None:
    """Fill every ``--bench-*`` option not given on the command line from its ini option, then
    from its default (idempotent: called before the first option is read)."""
    option = config.option
    if getattr(option, "_bench_ini_applied", False):
        return
    option._bench_ini_applied = True

    def ini(name: str) -> Any:
        value = config.getini(name)
        return value.strip() if isinstance(value, str) else value

    def bad(name: str, value: object, fix: str) -> pytest.UsageError:
        where = config.inipath or "the ini file"
        return pytest.UsageError(f"{where}: {name} = {value!r}: {fix}")

    if option.bench_home is None and (home := ini("bench_home")):
        base = config.inipath.parent if config.inipath else config.invocation_params.dir
        option.bench_home = str((base / Path(home).expanduser()).resolve())
    if option.bench_accept_risk is None:
        option.bench_accept_risk = bool(ini("bench_accept_risk"))
    if option.bench_baseline is None and (ref := ini("bench_baseline")):
        option.bench_baseline = ref
    if option.bench_fail_on is None and (words := ini("bench_fail_on")):
        try:
            option.bench_fail_on = _fail_on(words)
        except argparse.ArgumentTypeError as error:
            raise bad("bench_fail_on", words, str(error)) from None
    if option.bench_isolation is None:
        option.bench_isolation = ini("bench_isolation") or ISOLATIONS[0]
        if option.bench_isolation not in ISOLATIONS:
            raise bad("bench_isolation", option.bench_isolation, "give host or none")
    if option.bench_progress_every is None:
        every = ini("bench_progress_every")
        try:
            option.bench_progress_every = float(every) if every else DEFAULT_PROGRESS_EVERY_S
        except ValueError:
            raise bad("bench_progress_every", every, "give a number of seconds, e.g. 30") from None
    option.bench_set = [*(ini("bench_set") or []), *option.bench_set]
    # -n sets `dist` only once pytest-xdist's own hook has run, which may be after this one
    xdist = getattr(option, "dist", "no") != "no" or bool(getattr(option, "numprocesses", None))
    if option.bench_against and xdist:
        raise pytest.UsageError(
            f"--bench-against {option.bench_against}: both revisions are interleaved in one "
            "process, so it cannot run under pytest-xdist (-n); fix: leave out -n"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--bench-tune``: run the tuner instead of a session; its exit code is pytest's."""
    if not (config.getoption("bench") or config.getoption("bench_tune")):
        return None  # a plain test session reads no ini option of ours
    apply_ini(config)
    if not config.getoption("bench_tune"):
        return None
    from pytest_benchmark_agent.engine.session import default_home
    from pytest_benchmark_agent.tune.entry import tune_from_pytest

    return tune_from_pytest(config, default_home(config), _parse_overrides(config))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "bench: a benchmark trial (every item of a benchmark file carries it)"
    )
    if not config.getoption("bench"):
        return
    apply_ini(config)
    from pytest_benchmark_agent.util import redact

    redact.forget()  # this session's secrets only (an in-process run may follow another)
    from pytest_benchmark_agent.engine.collect import SESSION_KEY
    from pytest_benchmark_agent.engine.session import BenchSession, default_home
    from pytest_benchmark_agent.records.writer import RecordWriter
    from pytest_benchmark_agent.report.ci_summary import step_summary_writer
    from pytest_benchmark_agent.report.junit import TrialProperties
    from pytest_benchmark_agent.report.markdown import ReportWriter
    from pytest_benchmark_agent.report.progress import HeartbeatWriter, StageEcho

    worker = getattr(config, "workerinput", None)  # set by pytest-xdist in its workers
    if worker is not None:
        bench = BenchSession(
            config,
            default_home(config),  # the worker's own: machines need share no folder
            _parse_overrides(config),
            _round_points(config),
            token=tuple(worker["bench_token"]),
            worker_id=worker["workerid"],
        )
    else:
        bench = BenchSession(
            config, default_home(config), _parse_overrides(config), _round_points(config)
        )
    config.stash[SESSION_KEY] = bench
    config.pluginmanager.register(bench, "benchmark_agent_session")
    progress = HeartbeatWriter(config)
    config.pluginmanager.register(progress, "benchmark_agent_heartbeat")
    config.pluginmanager.register(TrialProperties(), "benchmark_agent_junit")
    if worker is None and config.getoption("capture") == "no":  # -s: stages' output live
        bench.stage_context.echo = StageEcho(config, progress)
    if worker is None:  # under xdist the controller alone writes the records
        config.pluginmanager.register(RecordWriter(), "benchmark_agent_records")
        config.pluginmanager.register(ReportWriter(), "benchmark_agent_reports")
    if worker is None and (summary := step_summary_writer()) is not None:
        config.pluginmanager.register(summary, "benchmark_agent_step_summary")
    if worker is None and getattr(config.option, "dist", "no") != "no":
        from pytest_benchmark_agent.engine.distributed import DistributedController

        config.pluginmanager.register(DistributedController(bench), "benchmark_agent_controller")
    if worker is not None:
        from pytest_benchmark_agent.engine.distributed import WorkerChannel

        channel = WorkerChannel(bench, worker["workerid"], config.workeroutput)
        config.pluginmanager.register(channel, "benchmark_agent_channel")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``-k`` on trials matches whole words of their ids (:func:`.collect.select_by_keyword`)."""
    if config.getoption("bench"):
        from pytest_benchmark_agent.engine.collect import select_by_keyword

        select_by_keyword(config, items)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--bench``, the data home is never walked: its bisect worktrees hold copies of
    the project's benchmark files, which a session given no file would otherwise collect."""
    if not config.getoption("bench"):
        return None
    from pytest_benchmark_agent.engine.collect import SESSION_KEY

    bench = config.stash.get(SESSION_KEY, None)
    if bench is not None and collection_path == bench.home:
        return True
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    config = parent.config
    if not config.getoption("bench") or file_path.suffix not in (".yaml", ".yml"):
        return None
    if any(file_path.match(p) for p in BENCH_FILE_PATTERNS) or _named_on_command_line(
        config, file_path
    ):
        from pytest_benchmark_agent.engine.collect import BenchFile

        return BenchFile.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def bench(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Run a benchmark file or a Python Domain from a test; returns a ``BenchRunner`` whose
    ``run(...)`` / ``run_domain(...)`` give a result with samples, stats and verdicts
    (``pytest_benchmark_agent.engine.fixture``). Its data directory is shared by the session."""
    from pytest_benchmark_agent.engine.fixture import BenchRunner

    return BenchRunner(
        home=tmp_path_factory.getbasetemp() / "bench_home",
        base=request.path.parent,
        scratch=tmp_path_factory.mktemp("bench"),
    )


def _named_on_command_line(config: pytest.Config, file_path: Path) -> bool:
    base = config.invocation_params.dir
    for arg in config.args:
        candidate = Path(arg.split("::")[0])
        if (base / candidate).resolve() == file_path.resolve():
            return True
    return False


def _round_points(config: pytest.Config) -> list[dict[str, Any]] | None:
    """The points of a tuning round, from the JSON file the tuner wrote (``{"points": [...]}``)."""
    path = config.getoption("bench_round")
    if not path:
        return None
    from pytest_benchmark_agent.records.bounded import read_json

    try:
        points = read_json(path)["points"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise pytest.UsageError(
            f"--bench-round {path}: cannot read the round's points ({exc}); "
            'expected JSON {"points": [{"param": value}, ...]}'
        ) from None
    if not isinstance(points, list) or not points or not all(isinstance(p, dict) for p in points):
        raise pytest.UsageError(
            f"--bench-round {path}: 'points' must be a non-empty list of "
            "mappings from tuned param to value"
        )
    return points


def _hash_seed_base(text: str) -> int:
    """``--bench-hash-seeds``: a recorded ``hash_seed_base``, an integer 0..HASH_SEEDS - 1."""
    from pytest_benchmark_agent.records.hashseeds import HASH_SEEDS

    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < HASH_SEEDS:
        raise argparse.ArgumentTypeError(
            f"--bench-hash-seeds {text!r}: give the hash_seed_base a run's results.yaml "
            f"records, an integer from 0 to {HASH_SEEDS - 1}"
        )
    return value


def _fail_on(text: str) -> tuple[str, ...]:
    """``--bench-fail-on``: a comma list of :data:`.fail_on.FAIL_ON`."""
    from pytest_benchmark_agent.judge.fail_on import fail_on_words

    try:
        return fail_on_words(text, "--bench-fail-on")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _lazy(name: str) -> Any:
    """An option type from engine/blocks.py, imported when an option is given (a plain test
    session never imports the engine)."""

    def parse(text: str) -> Any:
        from pytest_benchmark_agent.engine import blocks

        return getattr(blocks, name)(text)

    parse.__name__ = name.removesuffix("_option")
    return parse


def _warmup_rounds(text: str) -> int:
    """``--bench-warmup N``: a whole number of rounds, 0 to ``MAX_WARMUP``."""
    from pytest_benchmark_agent.config.fields import MAX_WARMUP

    try:
        rounds = int(text)
    except ValueError:
        rounds = -1
    if not 0 <= rounds <= MAX_WARMUP:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a whole number of warm-up rounds, 0 to {MAX_WARMUP}, "
            "e.g. --bench-warmup 1"
        )
    return rounds


def _parse_overrides(config: pytest.Config) -> dict[str, Any]:
    from pytest_benchmark_agent.config.safe_yaml import parse_value

    overrides: dict[str, Any] = {}
    for item in config.getoption("bench_set"):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise pytest.UsageError(
                f"--bench-set {item!r}: expected PARAM=VALUE, e.g. --bench-set corpus.n_docs=2000"
            )
        try:
            overrides[name.strip()] = parse_value(value, name.strip())
        except ValueError as error:  # printed to the terminal: no secret in it
            from pytest_benchmark_agent.util.redact import scrub_text

            raise pytest.UsageError(scrub_text(f"--bench-set {name.strip()}: {error}")) from None
    return overrides
