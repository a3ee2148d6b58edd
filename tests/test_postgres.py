"""The postgres reference domain against a real PostgreSQL server (private servers per stage,
on free local ports, stopped after), and how it finds the server binaries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_benchmark_agent.domains import postgres

UNAVAILABLE = postgres.available()
needs_server = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"PostgreSQL: {UNAVAILABLE}")

PARAMS = {
    "table.rows": 20000,
    "table.categories": 200,
    "table.seed": 1,
    "pg.index": "none",
    "pg.maintenance": "none",
    "pg.shared_buffers": "128MB",
    "pg.work_mem": "4MB",
    "pg.effective_cache_size": "4GB",
    "pg.random_page_cost": 4,
    "pg.jit": "off",
    "pg.max_parallel_workers_per_gather": 0,
    "n_queries": 40,
    "query.seed": 1,
}


def _leftover_servers() -> list[str]:
    return sorted(p.name for p in Path("/tmp").glob("bench-pg-*"))


@pytest.mark.happy
@needs_server
def test_an_index_changes_the_plan_at_identical_results(bench) -> None:
    before = _leftover_servers()
    result = bench.run_domain(
        "postgres",
        params=PARAMS,
        treatment_variable="pg.index",
        treatments=["none", "btree"],
        replicates=1,
    )
    assert result.counts == {"passed": 2}, result.session
    control, indexed = result.trials
    assert control.get("effective")["pg.plan"] == "Seq Scan"
    assert indexed.get("effective")["pg.plan"] != "Seq Scan"
    assert indexed.get("effective")["pg.index"] == "btree"
    assert control.get("effective")["pg.work_mem"] == "4MB"
    hashes = result.samples("results_hash")
    assert hashes["none"] == hashes["btree"]
    assert _leftover_servers() == before  # every private server was stopped and removed


@pytest.mark.happy
@needs_server
def test_a_setting_the_server_reports_otherwise_is_not_comparable(bench) -> None:
    params = {**PARAMS, "pg.work_mem": "4096kB", "pg.index": "btree"}
    result = bench.run_domain(
        "postgres",
        params=params,
        treatment_variable="pg.maintenance",
        treatments=["none", "cluster"],
        replicates=1,
    )
    assert result.counts == {"not_comparable": 2}, result.session
    assert "pg.work_mem: declared '4096kB', effective '4MB'" in result.trials[0].reason


def test_server_binaries_come_from_pg_bindir_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tool in ("initdb", "pg_ctl", "postgres"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
    monkeypatch.setenv("PG_BINDIR", str(tmp_path))
    assert postgres.server_binaries() == tmp_path
    monkeypatch.setenv("PG_BINDIR", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path / "missing"))
    if not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        with pytest.raises(postgres.PostgresUnavailable, match="apt-get install postgresql"):
            postgres.server_binaries()
    else:
        assert postgres.server_binaries().parent.parent == Path("/usr/lib/postgresql")


def test_root_runs_servers_as_an_unprivileged_user() -> None:
    user = postgres.server_user()
    assert (user is None) == (os.geteuid() != 0)
    if user is not None:
        assert user.pw_uid != 0
