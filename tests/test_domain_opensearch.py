"""The opensearch reference domain: against a real cluster where ``OPENSEARCH_URL`` is set, and
its failure when the cluster cannot be reached (a real refused connection) everywhere."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from pytest_benchmark_agent.domains.api import domain_class

URL = os.environ.get("OPENSEARCH_URL")


def _params(url: str) -> dict:
    entries = domain_class("opensearch", Path("x.yaml")).manifest_entries()
    params = {name: entry.default for name, entry in entries.items()}
    params.update(
        {"opensearch.url": url, "corpus.n_docs": 2000, "bulk.batch_size": 100, "n_queries": 50}
    )
    return params


def test_manifest_holds_the_merge_policy_and_scheduler_settings() -> None:
    manifest = domain_class("opensearch", Path("x.yaml")).manifest
    assert {
        "index.merge.policy.segments_per_tier",
        "index.merge.policy.max_merged_segment",
        "index.merge.policy.floor_segment",
        "index.merge.scheduler.max_thread_count",
        "index.refresh_interval",
    } <= set(manifest)


def test_an_unreachable_cluster_fails_the_trials_with_the_fix(bench) -> None:
    pytest.importorskip("opensearchpy", reason="opensearch-py is not installed")
    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    result = bench.run_domain(
        "opensearch",
        params=_params(url),
        treatment_variable="merge.max_num_segments",
        treatments=["none", 1],
        replicates=1,
    )
    assert result.counts == {"failed": 2}
    assert f"cannot reach OpenSearch at {url}" in result.trials[0]["reason"]


@pytest.mark.happy
@pytest.mark.skipif(
    URL is None,
    reason="OPENSEARCH_URL is not set: no OpenSearch cluster to "
    "run the force-merge benchmark against",
)
def test_force_merge_to_one_segment_at_identical_results(bench) -> None:
    result = bench.run_domain(
        "opensearch",
        params=_params(URL),
        treatment_variable="merge.max_num_segments",
        treatments=["none", 1],
        replicates=2,
    )
    assert result.counts == {"passed": 4}, result.output
    assert set(result.samples("segments")["1"]) == {1.0}
    hashes = result.samples("results_hash")
    assert set(hashes["none"]) == set(hashes["1"])
    assert result.trials[0]["effective"]["index.merge.policy.segments_per_tier"] in ("10", "10.0")
