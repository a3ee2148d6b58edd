"""One run as one portable JSON file, so a baseline can travel between CI jobs.

:func:`export_run` reads a run folder with the one loader (:func:`.record.load_run`) into a
document: the format's name and ``schema_version``, the run id, the record (``results.yaml``
with the journal merged in, its trials apart under ``trials``: every sample), the frozen
``config.yaml`` (config, effective params, fingerprints), the index entry and the report.
:func:`import_run` checks a document field by field (a file from a download is input, not
trusted: a run id that would leave the data directory, a wrong format or a truncated file is
refused with the field named) and adds the run to a data directory as the engine would have
written it (a :class:`.RunRecord` through the writer's :func:`.writer.write_record`), so
``--bench-baseline`` and ``compare`` find it. The records were redacted when written; nothing
here adds to them.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.records.bounded import (
    MAX_RECORD_BYTES,
    MAX_STATE_BYTES,
    BadJson,
    decode_json,
    read_json,
)
from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.reader import JOURNAL, UnreadableRecord
from pytest_benchmark_agent.records.record import RunRecord, load_run, record_of_files
from pytest_benchmark_agent.records.run import SCHEMA_VERSION
from pytest_benchmark_agent.records.runcheck import RecordFieldError, check_run_files
from pytest_benchmark_agent.records.schema import (
    PrepEvent,
    RecordShapeError,
    TrialRecord,
    check_verdict,
)
from pytest_benchmark_agent.records.writer import (
    build_index_entry,
    config_document,
    regenerate_index,
    write_record,
)
from pytest_benchmark_agent.util.fsutil import (
    NotRegularFile,
    atomic_write,
    file_lock,
    fsync_dir,
    read_regular,
    utc_now,
)
from pytest_benchmark_agent.util.safetext import inert_markdown

FORMAT = "pytest-benchmark-agent/run"
#: Longest run id accepted (a folder name; filesystems stop at 255 bytes).
MAX_RUN_ID = 200
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=@-]*")
_STAGING = ".imports"


class PortableError(ValueError):
    """A portable file that cannot be read or imported: names the file and the field."""

    def __init__(self, path: Path | str, field: str, message: str):
        self.path, self.field = Path(path), field
        super().__init__(f"{path}: {field + ': ' if field else ''}{message}")


# -- export ---------------------------------------------------------------------------------------


def export_run(run_dir: Path) -> dict[str, Any]:
    """The portable document of the run in ``run_dir``, read by the one loader
    (:func:`.record.load_run`): its record and ``config.yaml`` as the writer writes them."""
    run = load_run(run_dir)
    record = thaw(run)
    trials = record.pop("trials", None) or []
    index_path, report_path = run_dir / "index.json", run_dir / "report.md"
    index = None
    if index_path.is_file():
        with contextlib.suppress(OSError, BadJson):
            index = read_json(index_path, MAX_STATE_BYTES)
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_dir.name,
        "exported": utc_now(),
        "record": record,
        "config": config_document(run),
        "trials": trials,
        "index": index,
        "report": report_path.read_text() if report_path.is_file() else None,
    }


def to_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=1, default=str) + "\n"


# -- reading a file -------------------------------------------------------------------------------


def read_document(path: Path) -> dict[str, Any]:
    """The checked document in ``path``; PortableError naming the field otherwise."""
    try:
        text = read_regular(path, MAX_RECORD_BYTES).decode("utf-8")
    except NotRegularFile as exc:
        raise PortableError(path, "", f"cannot read it: a {exc.kind}, not a file") from None
    except OSError as exc:
        raise PortableError(path, "", f"cannot read it ({exc.strerror or exc})") from None
    except MemoryError:
        raise PortableError(path, "", "cannot read it: too large for memory") from None
    except UnicodeDecodeError as exc:
        raise PortableError(
            path, "", f"not UTF-8 text (byte {exc.start}): not an export of benchmark-agent"
        ) from None
    try:
        document = decode_json(text, path)
    except BadJson as exc:
        # The parser ran out of text, or the object's closing brace is missing.
        cut = text.lstrip().startswith("{") and (
            not text.rstrip().endswith("}")
            or (exc.position is not None and exc.position >= len(text.rstrip()))
        )
        raise PortableError(
            path,
            "",
            f"{exc.problem}" + ("; the file ends early: a truncated download?" if cut else ""),
        ) from None
    check_document(path, document)
    return document


def check_document(path: Path, document: Any) -> None:
    """Refuse a document that is not a run export this version reads, naming the field."""
    if not isinstance(document, dict):
        raise PortableError(path, "", f"expected a JSON object, found {_kind(document)}")
    _check_format(path, document)
    run_id = document.get("run_id")
    check_run_id(path, "run_id", run_id)
    record = _field(path, document, "record", dict)
    config = _field(path, document, "config", dict)
    trials = _field(path, document, "trials", list)
    if document.get("index") is not None and not isinstance(document["index"], dict):
        raise PortableError(
            path, "index", f"expected an object or null, found {_kind(document['index'])}"
        )
    if document.get("report") is not None and not isinstance(document["report"], str):
        raise PortableError(
            path, "report", f"expected text or null, found {_kind(document['report'])}"
        )
    for where, value in (
        ("record.run_id", record.get("run_id")),
        ("config.run_id", config.get("run_id")),
    ):
        if value is not None and value != run_id:
            raise PortableError(path, where, f"is {value!r}, but the file's run_id is {run_id!r}")
    _check_record(path, record)
    _check_config(path, config)
    _check_trials(path, trials)
    _check_typed(path, record, config, trials)


def _check_format(path: Path, document: Mapping[str, Any]) -> None:
    """The format's name, and a ``schema_version`` this version reads."""
    if document.get("format") != FORMAT:
        raise PortableError(
            path,
            "format",
            f"is {document.get('format')!r}, expected {FORMAT!r} "
            "(a file written by `benchmark-agent export`)",
        )
    version = document.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise PortableError(path, "schema_version", f"is {version!r}, expected an integer")
    if version != SCHEMA_VERSION:
        newer = version > SCHEMA_VERSION
        raise PortableError(
            path,
            "schema_version",
            f"is {version}, this version reads "
            f"{SCHEMA_VERSION}"
            + ("; upgrade pytest-benchmark-agent to import it" if newer else ""),
        )


def _check_record(path: Path, record: Mapping[str, Any]) -> None:
    """The record's name, state and tag, a finished state, and the shape of its tables."""
    for key in ("name", "state", "tag"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise PortableError(
                path, f"record.{key}", f"expected text, found {_kind(record.get(key))}"
            )
    if record["state"] == "running":
        raise PortableError(
            path,
            "record.state",
            "is 'running': the export was taken while its session still ran, so its record "
            "is partial and would be mixed with what that session writes later; export the "
            "run again once it has finished (benchmark-agent status names its state)",
        )
    for key, kind in (("summary", dict), ("verdicts", dict), ("treatments", list)):
        if record.get(key) is not None and not isinstance(record[key], kind):
            raise PortableError(
                path, f"record.{key}", f"expected {kind.__name__}, found {_kind(record[key])}"
            )


def _check_config(path: Path, config: Mapping[str, Any]) -> None:
    """The frozen config and fingerprint, the config validating with this version."""
    _field(path, config, "config", dict, "config.")
    _field(path, config, "fingerprint", dict, "config.")
    try:
        BenchmarkConfig.model_validate(config["config"])
    except ValueError as exc:
        first = str(exc).splitlines()[:3]
        raise PortableError(
            path,
            "config.config",
            "the frozen config does not validate with "
            "this version: " + " ".join(line.strip() for line in first),
        ) from None


def _check_trials(path: Path, trials: list[Any]) -> None:
    """Each trial an object with its id, treatment and status as text and its metrics."""
    for number, trial in enumerate(trials):
        where = f"trials[{number}]"
        if not isinstance(trial, dict):
            raise PortableError(path, where, f"expected an object, found {_kind(trial)}")
        for key in ("id", "treatment", "status"):
            if not isinstance(trial.get(key), str):
                raise PortableError(
                    path, f"{where}.{key}", f"expected text, found {_kind(trial.get(key))}"
                )
        if not isinstance(trial.get("metrics"), dict):
            raise PortableError(
                path, f"{where}.metrics", f"expected an object, found {_kind(trial.get('metrics'))}"
            )


def _check_typed(
    path: Path, record: Mapping[str, Any], config: Mapping[str, Any], trials: list[Any]
) -> None:
    """Every field as the typed loader (:func:`.record.load_run`) checks it once imported, so
    nothing is written that a verb would then skip or crash on: each trial, prep event and
    verdict of its type, and :func:`.runcheck.check_run_files` on the rest."""
    checked: list[tuple[str, Any, Any]] = [
        *((f"trials[{n}]", TrialRecord.from_dict, t) for n, t in enumerate(trials)),
        *(
            (f"record.preps[{n}]", PrepEvent.from_dict, p)
            for n, p in enumerate(_list(record.get("preps")))
        ),
        *(
            (f"record.verdicts.{metric}.{label}", check_verdict, verdict)
            for metric, per in _obj(record.get("verdicts")).items()
            for label, verdict in _obj(per).items()
        ),
    ]
    for where, check, value in checked:
        try:
            check(value)
        except RecordShapeError as problem:
            raise PortableError(
                path, f"{where}.{problem.field}", str(problem) + _REEXPORT
            ) from None
    try:
        check_run_files({**record, "trials": trials}, config)
    except RecordFieldError as error:
        field = error.field
        if field.startswith("config.yaml:"):
            field = "config." + field.removeprefix("config.yaml:")
        elif not field.startswith("trials["):
            field = "record." + field
        raise PortableError(path, field, error.problem + _REEXPORT) from None


#: The fix of a field the typed loader refuses.
_REEXPORT = "; fix: export the run again (benchmark-agent export RUN) or correct the field"


def _list(value: Any) -> list[Any]:
    """``value`` where it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def check_run_id(path: Path | str, field: str, run_id: Any) -> str:
    """A run id that names one folder inside ``runs/`` (no separator, no ``..``, no NUL)."""
    if not isinstance(run_id, str) or not run_id:
        raise PortableError(path, field, f"expected a run id, found {_kind(run_id)}")
    if len(run_id) > MAX_RUN_ID:
        raise PortableError(
            path,
            field,
            f"is {len(run_id)} characters long, at most {MAX_RUN_ID} make a run folder's name",
        )
    if not _SAFE_ID.fullmatch(run_id):
        raise PortableError(
            path,
            field,
            f"{run_id!r} is not a run folder's name (letters, "
            "digits and . _ - = @, starting with a letter or digit): it could "
            "write outside the data directory",
        )
    return run_id


def _field(path: Path, document: Mapping[str, Any], key: str, kind: type, prefix: str = "") -> Any:
    value = document.get(key)
    if not isinstance(value, kind):
        raise PortableError(
            path,
            prefix + key,
            f"expected {_kinds[kind]}, found {_kind(value)}"
            + ("" if key in document else " (missing)"),
        )
    return value


_kinds = {dict: "an object", list: "a list", str: "text"}


def _kind(value: Any) -> str:
    """How a found value is named in an error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"text {value[:40]!r}"
    return _kinds.get(type(value), type(value).__name__)


# -- import ---------------------------------------------------------------------------------------


def import_run(
    home: Path, document: Mapping[str, Any], source: Path, *, force: bool = False
) -> tuple[Path, str]:
    """Add the checked ``document`` to ``home`` as ``runs/<run_id>/``; returns the folder and
    what was done (``imported``, ``replaced``, ``already present``).

    The folder is written in a staging folder of ``home`` and renamed into place, so a reader
    sees the whole run or none of it; an existing run is replaced only with ``force`` (the
    same record again is left as it is).
    """
    run_id = check_run_id(source, "run_id", document["run_id"])
    runs = home / "runs"
    target = runs / run_id
    record = {**document["record"], "run_id": run_id, "trials": list(document["trials"])}
    frozen = {**document["config"], "run_id": run_id}
    incoming = record_of_files(record, frozen, target)
    staging = home / _STAGING
    staging.mkdir(parents=True, exist_ok=True)
    with file_lock(home / ".import.lock"):
        existed = target.exists()
        if existed and not force:
            if _same(_existing(target), incoming):
                return target, "already present"
            raise PortableError(
                source,
                "run_id",
                f"run {run_id} is already in {runs} with "
                "another record; pass --force to replace it",
            )
        folder = Path(tempfile.mkdtemp(prefix=f"{run_id[:40]}.", dir=staging))
        try:
            _write_run(folder, document, incoming.replace(dir=folder))
            runs.mkdir(parents=True, exist_ok=True)
            if existed:
                old = Path(tempfile.mkdtemp(prefix="replaced.", dir=staging))
                target.rename(old / run_id)
                folder.rename(target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                folder.rename(target)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        fsync_dir(runs)
    regenerate_index(home)
    return target, "replaced" if existed else "imported"


def _write_run(folder: Path, document: Mapping[str, Any], run: RunRecord) -> None:
    """The imported run's files in ``folder``: its record and ``config.yaml`` through the writer
    (:func:`.writer.write_record`), its journal, the exported report and its index entry."""
    results = write_record(run)
    atomic_write(
        folder / JOURNAL, "".join(json.dumps(t, default=str) + "\n" for t in results["trials"])
    )
    if document.get("report"):
        atomic_write(folder / "report.md", inert_markdown(document["report"]))
    entry = index_entry(run, document.get("index"))
    atomic_write(folder / "index.json", json.dumps(entry, indent=1))


def index_entry(run: RunRecord, exported: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``index.json`` entry the engine writes at a run's end, built from the record by
    :func:`.writer.build_index_entry`; the file's own entry gives only the keys this version
    does not build, and the code block where the fingerprint has no code identity."""
    entry = {**_obj(exported), **build_index_entry(run).to_dict(), "imported": utc_now()}
    if entry["code"] is None and isinstance(_obj(exported).get("code"), dict):
        entry["code"] = _obj(exported)["code"]
    return entry


def _existing(run_dir: Path) -> RunRecord | None:
    """The record already at ``run_dir``, None where it cannot be read."""
    try:
        return load_run(run_dir)
    except (UnreadableRecord, OSError, ValueError, KeyError, TypeError):
        return None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` where it is a mapping, else an empty one (a record is input here)."""
    return value if isinstance(value, dict) else {}


def _same(existing: RunRecord | None, incoming: RunRecord) -> bool:
    """Whether a run already on the home holds the same record as an imported one (their
    ``results.yaml`` documents compared as JSON, as the export holds them)."""

    def plain(value: Any) -> Any:
        return json.loads(json.dumps(thaw(value), default=str, sort_keys=True))

    return existing is not None and plain(existing) == plain(incoming)
