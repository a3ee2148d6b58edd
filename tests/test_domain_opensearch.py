"""The opensearch reference domain: its request/response handling against a recorded cluster (a
real HTTP server answering with the OpenSearch 2.18 documentation's responses, through the real
``opensearch-py`` client and real sessions), its failure when the cluster cannot be reached (a
real refused connection), and the real test against a cluster where ``OPENSEARCH_URL`` is set."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.recorded_opensearch import RecordedCluster, Refusal, recorded

from pytest_benchmark_agent.domains.api import domain_class
from pytest_benchmark_agent.engine.fixture import BenchRunner
from pytest_benchmark_agent.records.record import RunRecord

URL = os.environ.get("OPENSEARCH_URL")
#: A single-node cluster without the security plugin (so no admin password: 2.12 and later ask
#: for one only to install the demo security configuration), as the 2.18 Docker guide gives it.
CONTAINER = (
    "docker run -d --name bench-opensearch -p 9200:9200 -e discovery.type=single-node "
    "-e DISABLE_INSTALL_DEMO_CONFIG=true -e DISABLE_SECURITY_PLUGIN=true "
    "opensearchproject/opensearch:2.18.0"
)

pytest.importorskip("opensearchpy", reason="opensearch-py is not installed")


def _params(url: str, **overrides: object) -> dict:
    entries = domain_class("opensearch", Path("x.yaml")).manifest_entries()
    params = {name: entry.default for name, entry in entries.items()}
    params.update(
        {"opensearch.url": url, "corpus.n_docs": 2000, "bulk.batch_size": 100, "n_queries": 50}
    )
    params.update(overrides)
    return params


@pytest.fixture
def cluster() -> Iterator[RecordedCluster]:
    with RecordedCluster() as running:
        yield running


@pytest.fixture
def runner(tmp_path: Path) -> BenchRunner:
    """A ``bench`` runner whose data directory is this test's: the cache must not outlive the
    cluster its receipts describe (a later test's cluster may get this one's port)."""
    return BenchRunner(home=tmp_path / "home", base=Path(__file__).parent, scratch=tmp_path)


def _ab(runner: BenchRunner, cluster: RecordedCluster, **fields: object) -> RunRecord:
    return runner.run_domain(
        "opensearch",
        params=_params(cluster.url),
        treatment_variable="merge.max_num_segments",
        treatments=["none", 1],
        **{"replicates": 1, **fields},
    )


def _reasons(result: RunRecord) -> list[str]:
    return [trial.reason for trial in result.trials]


def test_manifest_holds_the_merge_policy_and_scheduler_settings() -> None:
    manifest = domain_class("opensearch", Path("x.yaml")).manifest
    assert {
        "index.merge.policy.segments_per_tier",
        "index.merge.policy.max_merged_segment",
        "index.merge.policy.floor_segment",
        "index.merge.scheduler.max_thread_count",
        "index.refresh_interval",
    } <= set(manifest)


def test_the_recorded_responses_keep_the_documented_shapes() -> None:
    """The double fills these in; a field the domain reads must be where the docs put it."""
    assert recorded("info")["version"]["number"] == "2.18.0"
    assert {"index", "shard", "prirep", "segment"} <= set(recorded("cat_segments")[0])
    assert set(recorded("forcemerge")["_shards"]) == {"total", "successful", "failed"}
    assert {"_id", "_score"} <= set(recorded("search")["hits"]["hits"][0])
    assert "count" in recorded("count") and "_source" in recorded("get_document")
    assert (Path(__file__).parent / "data" / "opensearch" / "PROVENANCE.md").is_file()


def test_force_merge_ab_through_the_recorded_cluster(
    runner: BenchRunner, cluster: RecordedCluster
) -> None:
    result = _ab(runner, cluster, replicates=2)
    assert result.counts == {"passed": 4}, result.session
    segments = result.samples("segments")
    assert set(segments["1"]) == {1.0}
    assert set(segments["none"]) == {20.0}  # one segment per refreshed batch of 100
    hashes = result.samples("results_hash")
    assert len(set(hashes["none"] + hashes["1"])) == 1
    effective = result.trials[0].get("effective")
    assert effective["index.merge.policy.segments_per_tier"] == "10"
    assert effective["index.refresh_interval"] == "-1"

    # what the domain sent: the loaded index blocked for writes before either clone,
    # each treatment's clone, one force merge (to 1 segment), top-10 searches
    (loaded,) = {line["index"]["_index"] for c in cluster.calls("_bulk") for line in c.body[::2]}
    assert len(cluster.calls("_bulk")) == 20
    block = cluster.calls("_settings")[0]
    assert (block.method, block.path, block.body) == (
        "PUT",
        f"/{loaded}/_settings",
        {"index.blocks.write": True},
    )
    assert cluster.requests.index(block) < cluster.requests.index(cluster.calls("_clone")[0])
    assert {call.path for call in cluster.calls("_clone")} == {
        f"/{loaded}/_clone/{loaded}-mnone",
        f"/{loaded}/_clone/{loaded}-m1",
    }
    (merge,) = cluster.calls("_forcemerge")
    assert (merge.path, merge.query) == (f"/{loaded}-m1/_forcemerge", {"max_num_segments": "1"})
    searches = cluster.calls("_search")
    assert len(searches) == 4 * 2 * 50  # 4 trials, each warming up and timing 50 queries
    assert {(s.body["size"], s.body["track_total_hits"]) for s in searches} == {(10, False)}
    assert {call.query.get("format") for call in cluster.calls("segments")} == {"json"}


def test_ties_come_back_in_another_order_per_treatment_and_hash_equal(
    runner: BenchRunner, cluster: RecordedCluster
) -> None:
    from opensearchpy import OpenSearch

    result = _ab(runner, cluster)
    assert result.counts == {"passed": 2}, result.session
    assert result.samples("results_hash")["none"] == result.samples("results_hash")["1"]
    client = OpenSearch(cluster.url)
    (merge,) = cluster.calls("_forcemerge")
    merged = merge.path.split("/")[1]
    control = merged.removesuffix("-m1") + "-mnone"
    differed = 0
    for query in {repr(c.body): c.body for c in cluster.calls("_search")}.values():
        pages = [
            [
                (hit["_score"], hit["_id"])
                for hit in client.search(index=i, body=query)["hits"]["hits"]
            ]
            for i in (control, merged)
        ]
        assert sorted(pages[0]) == sorted(pages[1])
        differed += pages[0] != pages[1]
    assert differed  # the hash held although the order of ties did not


def test_replica_segments_are_not_counted(runner: BenchRunner, cluster: RecordedCluster) -> None:
    from opensearchpy import OpenSearch

    result = runner.run_domain(
        "opensearch",
        params=_params(cluster.url, **{"index.replicas": 1, "merge.max_num_segments": 1}),
        replicates=1,
    )
    assert result.counts == {"passed": 1}, result.session
    assert result.samples("segments")["default"] == [1.0]
    (merge,) = cluster.calls("_forcemerge")
    rows = OpenSearch(cluster.url).cat.segments(
        index=merge.path.split("/")[1], params={"format": "json"}
    )
    assert sorted(row["prirep"] for row in rows) == ["p", "r"]


def test_a_search_answering_500_fails_the_trials_naming_the_call(
    runner: BenchRunner, cluster: RecordedCluster
) -> None:
    failure = Refusal(500, "search_phase_execution_exception", "all shards failed").body
    cluster.fault("_search", 500, failure)
    result = _ab(runner, cluster)
    assert result.counts == {"failed": 2}, result.session
    for reason in _reasons(result):
        assert f"OpenSearch at {cluster.url} answered POST /bench-" in reason
        assert "/_search with TransportError(500, 'search_phase_execution_exception'" in reason
        assert "Traceback" not in reason


def _without_hits() -> dict:
    answer = recorded("search")
    del answer["hits"]
    return answer


def _score_as_text() -> dict:
    answer = recorded("search")
    answer["hits"]["hits"][0]["_score"] = "1.0"
    return answer


@pytest.mark.parametrize(
    ("answer", "says"),
    [(_without_hits, "without hits.hits (got {"), (_score_as_text, "with an unusable _score")],
)
def test_a_search_answer_lacking_what_is_read_fails_the_trials_naming_the_field(
    runner: BenchRunner, cluster: RecordedCluster, answer: Callable[[], dict], says: str
) -> None:
    cluster.fault("_search", 200, answer())
    result = _ab(runner, cluster)
    assert result.counts == {"failed": 2}, result.session
    for reason in _reasons(result):
        assert f"/_search {says}" in reason
        assert "Traceback" not in reason


def test_an_index_gone_from_the_cluster_asks_to_remove_its_cache_entry(
    runner: BenchRunner, cluster: RecordedCluster
) -> None:
    params = _params(cluster.url, **{"merge.max_num_segments": 1})
    assert runner.run_domain("opensearch", params=params, replicates=1).counts == {"passed": 1}
    (merge,) = cluster.calls("_forcemerge")
    cluster.forget(merge.path.split("/")[1])
    bulks = len(cluster.calls("_bulk"))
    result = runner.run_domain("opensearch", params=params, replicates=1)
    assert result.counts == {"failed": 1}, result.session
    (reason,) = _reasons(result)
    assert "holds None documents, not the 2000 its cache entry recorded" in reason
    assert "remove that cache entry" in reason and "Traceback" not in reason
    assert len(cluster.calls("_bulk")) == bulks  # the preps came from the cache


def test_an_unreachable_cluster_fails_the_trials_with_the_fix(bench) -> None:
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
    assert f"cannot reach OpenSearch at {url}" in result.trials[0].reason
    assert "Traceback" not in result.trials[0].reason


@pytest.mark.happy
@pytest.mark.skipif(
    URL is None,
    reason="OPENSEARCH_URL is not set: no OpenSearch cluster to run the force-merge benchmark "
    f"against; start one with `{CONTAINER}`, then run `OPENSEARCH_URL=http://localhost:9200 "
    "pytest -m happy tests/test_domain_opensearch.py`",
)
def test_force_merge_to_one_segment_at_identical_results(bench) -> None:
    result = bench.run_domain(
        "opensearch",
        params=_params(URL),
        treatment_variable="merge.max_num_segments",
        treatments=["none", 1],
        replicates=2,
    )
    assert result.counts == {"passed": 4}, result.session
    assert set(result.samples("segments")["1"]) == {1.0}
    hashes = result.samples("results_hash")
    assert set(hashes["none"]) == set(hashes["1"])
    assert result.trials[0].get("effective")["index.merge.policy.segments_per_tier"] in (
        "10",
        "10.0",
    )
