"""``domain: postgres``: an index (and ``VACUUM`` / ``CLUSTER``) against query latency on a real
PostgreSQL server.

Every stage runs its own private server: ``initdb`` into a temporary folder, ``pg_ctl start`` on
a free port of 127.0.0.1 (and a socket in that folder), ``pg_ctl stop`` when the stage ends, so
nothing outside the stage is touched. The data directory itself is the cached artifact: ``load``
fills a table, ``prepare`` applies the treatment (``pg.index``, ``pg.maintenance``) to a copy,
and every trial copies the prepared directory again before starting a server on it (a running
server rewrites its data directory, and a cached artifact must keep its content hash). The
server settings that change plans and timings are manifest params, passed with ``-c`` and read
back with ``SHOW`` as effective params: a setting the server did not take (or reports in other
units) makes the trial non-comparable instead of silently measuring something else.

PostgreSQL refuses to run as root: as root, the servers run as the ``postgres`` user (else
``nobody``). The server binaries are found on ``PATH``, in ``$PG_BINDIR``, or in Debian's
``/usr/lib/postgresql/<version>/bin``. The client is ``psycopg`` (``pip install psycopg[binary]``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import random
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure, prep
from pytest_benchmark_agent.domains.timing import percentile

INDEXES = ("none", "btree")
MAINTENANCE = ("none", "vacuum", "cluster")
#: Server settings a measurement depends on: manifest param -> PostgreSQL setting.
SETTINGS = {
    "pg.shared_buffers": "shared_buffers",
    "pg.work_mem": "work_mem",
    "pg.effective_cache_size": "effective_cache_size",
    "pg.random_page_cost": "random_page_cost",
    "pg.jit": "jit",
    "pg.max_parallel_workers_per_gather": "max_parallel_workers_per_gather",
}
QUERY = "SELECT count(*), sum(price) FROM items WHERE category = %s"
_USER = "bench"


class PostgresUnavailable(RuntimeError):
    """The server binaries or the client library are missing; the message says how to fix it."""


def server_binaries() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    candidates = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    candidates += reversed(debian)
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found "
        "on PATH, in $PG_BINDIR or in /usr/lib/postgresql/*/bin; install "
        "them (apt-get install postgresql) or set PG_BINDIR"
    )


def server_user() -> pwd.struct_passwd | None:
    """The unprivileged account servers run as when this process is root (else None)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable(
        "running as root, and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL as"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A private PostgreSQL server on a data directory in its own temporary folder.

    ``source``: start from a copy of that data directory (else ``initdb`` a new one);
    ``keep``: after a clean stop, copy the data directory there. The folder is always removed.
    """

    def __init__(
        self,
        source: Path | None = None,
        settings: Mapping[str, Any] | None = None,
        keep: Path | None = None,
    ):
        self.bindir = server_binaries()
        self.user = server_user()
        self.root = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.settings = dict(settings or {})
        self._source = source
        self._keep = keep

    def _run(self, *args: str) -> None:
        """Run a server tool as the server's user; its output is kept for the error message."""
        ids = {"user": self.user.pw_uid, "group": self.user.pw_gid} if self.user else {}
        done = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.root,
            **ids,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.is_file() else ""
            raise RuntimeError(
                f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}\n{tail}"
            )

    def __enter__(self) -> Server:
        if self._source is None:
            self._chown(self.root)
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                _USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
        else:
            shutil.copytree(self._source, self.data, symlinks=True)
            self._chown(self.root)
        options = [
            "-p",
            str(self.port),
            "-k",
            str(self.root),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
        ]
        for name, value in self.settings.items():
            options += ["-c", f"{name}={value}"]
        try:
            self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-o",
                shlex.join(options),
                "start",
            )
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            if exc[0] is None and self._keep is not None:
                shutil.copytree(self.data, self._keep, symlinks=True)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _chown(self, folder: Path) -> None:
        if self.user is None:
            return
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, self.user.pw_uid, self.user.pw_gid, follow_symlinks=False)

    def connect(self):
        try:
            import psycopg
        except ImportError:
            raise PostgresUnavailable(
                "the PostgreSQL client is missing: pip install 'psycopg[binary]'"
            ) from None
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=_USER, dbname="postgres", autocommit=True
        )


class Postgres(Domain):
    """An index (and VACUUM / CLUSTER) against point-query latency, at identical results."""

    manifest = {
        "table.rows": {
            "default": 200000,
            "why": "the table's size: what a sequential scan reads and what an index saves",
        },
        "table.categories": {
            "default": 1000,
            "why": "distinct values of the queried column: its selectivity",
        },
        "table.seed": {"default": 1, "why": "it fixes the rows every treatment holds"},
        "pg.index": {"default": "none", "why": "the index on the queried column: none or btree"},
        "pg.maintenance": {
            "default": "none",
            "why": "what is done after loading: none, vacuum "
            "(VACUUM ANALYZE) or cluster (CLUSTER on the btree index)",
        },
        "pg.shared_buffers": {
            "default": "128MB",
            "why": "the server's page cache: what stays in memory between queries",
        },
        "pg.work_mem": {"default": "4MB", "why": "memory per sort or hash before spilling"},
        "pg.effective_cache_size": {
            "default": "4GB",
            "why": "the planner's guess of the OS "
            "cache, which tips it between index and sequential scans",
        },
        "pg.random_page_cost": {
            "default": 4,
            "why": "the planner's cost of a random page read relative to a sequential one",
        },
        "pg.jit": {"default": "off", "why": "JIT compilation adds compile time to queries"},
        "pg.max_parallel_workers_per_gather": {
            "default": 0,
            "why": "parallel workers per query: they change latency and its noise",
        },
        "n_queries": {"default": 200, "why": "the number of timed queries behind each percentile"},
        "query.seed": {
            "default": 1,
            "why": "it fixes the queried categories, the same for every treatment",
        },
    }
    metrics = {
        "p50_ms": {"direction": "lower", "primary": True, "noise_threshold": 0.02},
        "p95_ms": {"direction": "lower"},
        "results_hash": {"direction": "equal", "guard": True},
    }
    resources = {"mem_mb": 2048}

    @prep(produces=["loaded"], params=["table.rows", "table.categories", "table.seed"])
    def load(self, call: StageCall) -> dict[str, float]:
        """A fresh cluster holding ``items(id, category, price, payload)``, seeded."""
        p = call.params
        with Server(keep=call.artifacts["loaded"]) as server, server.connect() as conn:
            conn.execute("SELECT setseed(%s)", (1.0 / (1 + p["table.seed"]),))
            conn.execute(
                "CREATE TABLE items (id int PRIMARY KEY, category int NOT NULL, "
                "price numeric(10, 2) NOT NULL, payload text NOT NULL)"
            )
            conn.execute(
                "INSERT INTO items SELECT g, (random() * %s)::int, "
                "round((random() * 1000)::numeric, 2), md5(g::text) "
                "FROM generate_series(1, %s) AS g",
                (p["table.categories"] - 1, p["table.rows"]),
            )
            version = conn.execute("SHOW server_version").fetchone()[0]
        call.effective["pg.server_version"] = version
        return {"rows": float(p["table.rows"])}

    @prep(produces=["prepared"], needs=["load"], params=["pg.index", "pg.maintenance"])
    def prepare(self, call: StageCall) -> None:
        """A copy of the loaded cluster with the treatment applied, then ``ANALYZE``d."""
        index, maintenance = call.params["pg.index"], call.params["pg.maintenance"]
        if index not in INDEXES or maintenance not in MAINTENANCE:
            raise ValueError(
                f"pg.index={index!r} (use {', '.join(INDEXES)}), "
                f"pg.maintenance={maintenance!r} (use {', '.join(MAINTENANCE)})"
            )
        if maintenance == "cluster" and index != "btree":
            raise ValueError("pg.maintenance=cluster needs pg.index=btree to cluster on")
        with (
            Server(call.artifacts["loaded"], keep=call.artifacts["prepared"]) as server,
            server.connect() as conn,
        ):
            if index == "btree":
                conn.execute("CREATE INDEX items_category ON items (category)")
            if maintenance == "vacuum":
                conn.execute("VACUUM ANALYZE items")
            elif maintenance == "cluster":
                conn.execute("CLUSTER items USING items_category")
            conn.execute("ANALYZE items")
            call.effective["pg.index"] = (
                "btree"
                if conn.execute(
                    "SELECT count(*) FROM pg_indexes WHERE indexname = 'items_category'"
                ).fetchone()[0]
                else "none"
            )
            call.effective["pg.maintenance"] = maintenance

    @measure(
        needs=["prepare"],
        params=["n_queries", "query.seed", "table.categories", *SETTINGS],
        metrics=["p50_ms", "p95_ms", "results_hash"],
    )
    def query(self, call: StageCall) -> dict[str, float]:
        """Start a server on a copy with the declared settings, warm up, time each query."""
        p = call.params
        settings = {setting: p[param] for param, setting in SETTINGS.items()}
        rng = random.Random(p["query.seed"])
        categories = [rng.randrange(p["table.categories"]) for _ in range(p["n_queries"])]
        with Server(call.artifacts["prepared"], settings) as server, server.connect() as conn:
            for param, setting in SETTINGS.items():
                call.effective[param] = conn.execute(f"SHOW {setting}").fetchone()[0]
            plan = conn.execute(f"EXPLAIN (FORMAT JSON) {QUERY}", (categories[0],)).fetchone()[0]
            call.effective["pg.plan"] = _scan_node(plan[0]["Plan"])
            for category in categories:
                conn.execute(QUERY, (category,)).fetchall()
            times, digest = [], hashlib.sha256()
            for category in categories:
                start = time.perf_counter_ns()
                rows = conn.execute(QUERY, (category,)).fetchall()
                times.append((time.perf_counter_ns() - start) / 1e6)
                digest.update(repr(rows).encode())
        return {
            "p50_ms": percentile(times, 0.5),
            "p95_ms": percentile(times, 0.95),
            "results_hash": int(digest.hexdigest()[:13], 16),
        }


def _scan_node(plan: Mapping[str, Any]) -> str:
    """The node that reads the table (e.g. ``Seq Scan``, ``Bitmap Heap Scan``, ``Index Scan``)."""
    nodes: list[Mapping[str, Any]] = [plan]
    while nodes:
        node = nodes.pop()
        if "Relation Name" in node:
            return str(node["Node Type"])
        nodes += node.get("Plans", [])
    return str(plan["Node Type"])


def available() -> str | None:
    """None where a server can run here; otherwise why not (for tests to skip with)."""
    try:
        server_binaries()
        server_user()
        import psycopg  # noqa: F401
    except (PostgresUnavailable, ImportError) as exc:
        return str(exc)
    return None


__all__ = ["Postgres", "PostgresUnavailable", "Server", "available", "server_binaries"]
