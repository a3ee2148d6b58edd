"""``domain: opensearch``: does force-merging an index's segments make searches faster?

Against the cluster at ``opensearch.url`` (via ``opensearch-py``). ``load`` bulk-indexes a
generated corpus in refreshed batches (each refresh writes segments) into an index named by the
stage's params, with the merge policy, merge scheduler and refresh settings the manifest
requires: they decide how many segments the control holds, so a drift in any of them makes
force-merge comparisons unfair. ``merge`` clones that index (segments and settings as they are)
and force-merges the clone to ``merge.max_num_segments`` (``none`` leaves it). ``search`` times
the same match queries against each clone, hashes every result list, and reads the settings and
the segment count back from the cluster as effective params and a metric.

The cluster's state is outside the cache: the cached artifacts are receipts (index name, document
count, settings); ``search`` refuses, with the fix, an index that is gone or holds other data.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Mapping
from typing import Any

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure, prep
from pytest_benchmark_agent.domains.sqlite_fts5 import corpus
from pytest_benchmark_agent.domains.timing import percentile

#: Index settings a force-merge comparison depends on: manifest param -> index setting.
SETTINGS = {
    "index.merge.policy.segments_per_tier": "index.merge.policy.segments_per_tier",
    "index.merge.policy.max_merged_segment": "index.merge.policy.max_merged_segment",
    "index.merge.policy.floor_segment": "index.merge.policy.floor_segment",
    "index.merge.scheduler.max_thread_count": "index.merge.scheduler.max_thread_count",
    "index.refresh_interval": "index.refresh_interval",
    "index.shards": "index.number_of_shards",
    "index.replicas": "index.number_of_replicas",
}


def client(url: str):
    """An ``opensearch-py`` client that fails fast, with the fix when the cluster is away."""
    from opensearchpy import OpenSearch
    from opensearchpy.exceptions import ConnectionError as Unreachable

    connection = OpenSearch(url, max_retries=0, timeout=60)
    try:
        connection.info()
    except Unreachable as exc:
        raise RuntimeError(
            f"cannot reach OpenSearch at {url} ({exc.__class__.__name__}); start "
            "the cluster or set opensearch.url to one that answers"
        ) from None
    return connection


def read_settings(connection, index: str) -> dict[str, str]:
    """The manifest's settings as the cluster holds them for ``index`` (defaults included)."""
    answer = connection.indices.get_settings(
        index=index, params={"include_defaults": "true", "flat_settings": "true"}
    )
    found = answer[index]
    merged = {**found.get("defaults", {}), **found.get("settings", {})}
    return {param: str(merged.get(setting)) for param, setting in SETTINGS.items()}


def receipt(path, **fields: Any) -> None:
    path.write_text(json.dumps(fields, sort_keys=True))


def segment_count(connection, index: str) -> int:
    stats = connection.indices.stats(index=index, metric="segments")
    return int(stats["indices"][index]["primaries"]["segments"]["count"])


class OpenSearch(Domain):
    """Force-merge (``max_num_segments``) against search latency, at identical results."""

    manifest = {
        "opensearch.url": {
            "default": "http://localhost:9200",
            "why": "the cluster measured: another cluster is another system",
        },
        "corpus.n_docs": {"default": 20000, "why": "the index's size"},
        "corpus.seed": {"default": 1, "why": "it fixes the documents"},
        "bulk.batch_size": {
            "default": 500,
            "why": "documents per refreshed batch: with the "
            "merge policy, how many segments the control holds",
        },
        "index.shards": {"default": 1, "why": "segments are per shard; so are searches"},
        "index.replicas": {"default": 0, "why": "replicas merge on their own"},
        "index.refresh_interval": {
            "default": "-1",
            "why": "background refreshes write segments of their own (-1: only the loader's)",
        },
        "index.merge.policy.segments_per_tier": {
            "default": 10,
            "why": "how many segments a tier holds before the policy merges them",
        },
        "index.merge.policy.max_merged_segment": {
            "default": "5gb",
            "why": "the largest segment a natural merge produces",
        },
        "index.merge.policy.floor_segment": {
            "default": "2mb",
            "why": "segments below it are merged as if this large",
        },
        "index.merge.scheduler.max_thread_count": {
            "default": 1,
            "why": "concurrent merges: what merges while loading",
        },
        "merge.max_num_segments": {
            "default": "none",
            "why": "the force-merge target: none, or the segments per shard to merge down to",
        },
        "n_queries": {"default": 200, "why": "the number of timed queries behind each percentile"},
        "query.seed": {"default": 1, "why": "it fixes the queries, the same for every treatment"},
    }
    metrics = {
        "p50_ms": {"direction": "lower", "primary": True, "noise_threshold": 0.02},
        "p95_ms": {"direction": "lower"},
        "results_hash": {"direction": "equal", "guard": True},
        "segments": {"direction": "lower"},
    }
    resources = {"mem_mb": 1024}

    @prep(
        produces=["loaded"],
        params=["opensearch.url", "corpus.n_docs", "corpus.seed", "bulk.batch_size", *SETTINGS],
    )
    def load(self, call: StageCall) -> dict[str, float]:
        """A fresh index of the corpus, loaded in refreshed batches, then write-blocked."""
        from opensearchpy.helpers import bulk

        p = call.params
        connection = client(p["opensearch.url"])
        name = (
            "bench-" + hashlib.sha256(json.dumps(dict(p), sort_keys=True).encode()).hexdigest()[:16]
        )
        connection.indices.delete(index=name, params={"ignore_unavailable": "true"})
        settings = {setting: p[param] for param, setting in SETTINGS.items()}
        connection.indices.create(
            index=name,
            body={"settings": settings, "mappings": {"properties": {"body": {"type": "text"}}}},
        )
        docs = list(corpus(p["corpus.n_docs"], p["corpus.seed"]))
        for start in range(0, len(docs), p["bulk.batch_size"]):
            batch = docs[start : start + p["bulk.batch_size"]]
            bulk(
                connection, ({"_index": name, "_id": rowid, "body": body} for rowid, body in batch)
            )
            connection.indices.refresh(index=name)
        connection.indices.put_settings(index=name, body={"index.blocks.write": True})
        call.effective.update(read_settings(connection, name))
        receipt(call.artifacts["loaded"], index=name, docs=len(docs), url=p["opensearch.url"])
        return {"segments": float(segment_count(connection, name))}

    @prep(produces=["merged"], needs=["load"], params=["opensearch.url", "merge.max_num_segments"])
    def merge(self, call: StageCall) -> dict[str, float]:
        """Clone the loaded index and force-merge the clone to the treatment's target."""
        target_segments = call.params["merge.max_num_segments"]
        if target_segments != "none" and not (
            isinstance(target_segments, int) and target_segments >= 1
        ):
            raise ValueError(
                f"merge.max_num_segments={target_segments!r}: use none or an integer >= 1"
            )
        loaded = json.loads(call.artifacts["loaded"].read_text())
        connection = client(call.params["opensearch.url"])
        clone = f"{loaded['index']}-m{target_segments}"
        connection.indices.delete(index=clone, params={"ignore_unavailable": "true"})
        connection.indices.clone(
            index=loaded["index"], target=clone, params={"wait_for_active_shards": "1"}
        )
        if target_segments != "none":
            connection.indices.forcemerge(
                index=clone, params={"max_num_segments": str(target_segments)}
            )
        connection.indices.refresh(index=clone)
        call.effective["merge.max_num_segments"] = target_segments
        receipt(
            call.artifacts["merged"],
            index=clone,
            docs=loaded["docs"],
            url=call.params["opensearch.url"],
        )
        return {"segments": float(segment_count(connection, clone))}

    @measure(
        needs=["merge"],
        params=["opensearch.url", "n_queries", "query.seed"],
        metrics=["p50_ms", "p95_ms", "results_hash", "segments"],
    )
    def search(self, call: StageCall) -> dict[str, float]:
        """Check the cached index is still there, warm up, then time each match query."""
        merged = json.loads(call.artifacts["merged"].read_text())
        connection = client(call.params["opensearch.url"])
        index = merged["index"]
        held = (
            connection.count(index=index, params={"ignore_unavailable": "true"})["count"]
            if connection.indices.exists(index=index)
            else None
        )
        if held != merged["docs"]:
            raise RuntimeError(
                f"index {index} on {merged['url']} holds {held} documents, not "
                f"the {merged['docs']} its cache entry recorded (deleted or "
                "changed on the cluster); remove that cache entry (benchmark "
                "data cache/) so the preps rebuild it"
            )
        call.effective.update(read_settings(connection, index))
        queries = self._queries(
            connection, index, call.params["n_queries"], call.params["query.seed"], merged["docs"]
        )
        for query in queries:
            connection.search(index=index, body=query)
        times, digest = [], hashlib.sha256()
        for query in queries:
            start = time.perf_counter_ns()
            answer = connection.search(index=index, body=query)
            times.append((time.perf_counter_ns() - start) / 1e6)
            # ties in score may come in any order (it follows the segments): compare as sets
            digest.update(
                repr(
                    sorted((round(hit["_score"], 4), hit["_id"]) for hit in answer["hits"]["hits"])
                ).encode()
            )
        return {
            "p50_ms": percentile(times, 0.5),
            "p95_ms": percentile(times, 0.95),
            "results_hash": int(digest.hexdigest()[:13], 16),
            "segments": float(segment_count(connection, index)),
        }

    @staticmethod
    def _queries(
        connection, index: str, count: int, seed: int, docs: int
    ) -> list[Mapping[str, Any]]:
        """Match queries of 1-3 words of a random document each, top 10."""
        rng = random.Random(seed)
        queries = []
        for _ in range(count):
            body = connection.get(index=index, id=rng.randint(1, docs))["_source"]["body"]
            words = rng.sample(body.split(), rng.randint(1, 3))
            queries.append(
                {
                    "size": 10,
                    "track_total_hits": False,
                    "query": {"match": {"body": " ".join(words)}},
                }
            )
        return queries
