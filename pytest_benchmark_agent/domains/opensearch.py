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
count, settings); ``search`` refuses, with the fix, an index that is gone or holds other data. An
error status, a lost connection or an answer without the field the stage reads fails the stage
with one line naming the call (:class:`ClusterAnswer`), never with a traceback.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure, prep
from pytest_benchmark_agent.domains.sqlite_fts5 import corpus
from pytest_benchmark_agent.domains.timing import percentile
from pytest_benchmark_agent.util.safetext import one_line

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


class ClusterAnswer(SystemExit):
    """An answer of the cluster the stage cannot use. A ``SystemExit`` with a message, so the
    stage exits 1 with that one line on stderr: the trial's reason reads as the call and the fix,
    not as a traceback of this module."""


class Cluster:
    """The cluster at ``url`` through ``opensearch-py``, each call labelled for its failure."""

    def __init__(self, url: str):
        from opensearchpy import OpenSearch

        self.url = url
        self.client = OpenSearch(url, max_retries=0, timeout=60)
        self.ask("GET /", self.client.info)

    def ask(self, call: str, request: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``request(*args, **kwargs)``'s answer; a refused or lost connection, or an error
        status, raises :class:`ClusterAnswer` naming ``call`` and the cluster."""
        from opensearchpy.exceptions import ConnectionError as Unreachable
        from opensearchpy.exceptions import TransportError

        try:
            return request(*args, **kwargs)
        except Unreachable as exc:
            raise ClusterAnswer(
                f"cannot reach OpenSearch at {self.url} ({exc.__class__.__name__}, during "
                f"{call}); start the cluster or set opensearch.url to one that answers"
            ) from None
        except TransportError as exc:
            raise ClusterAnswer(
                f"OpenSearch at {self.url} answered {call} with {one_line(exc, 300)}; "
                "the cluster's log says why (nothing was measured from this answer)"
            ) from None

    def field(
        self, answer: Any, call: str, *keys: str, kind: type | tuple[type, ...] = object
    ) -> Any:
        """``answer[keys[0]][keys[1]]...``, an instance of ``kind``; a missing field or one of
        another type raises :class:`ClusterAnswer` naming ``call`` and the field, instead of a
        ``KeyError`` or ``TypeError`` deep in the stage."""
        value, found = answer, True
        for key in keys:
            found = isinstance(value, Mapping) and key in value
            if not found:
                break
            value = value[key]
        # a JSON true/false is never what a stage reads, though Python counts it an int
        if not found or not isinstance(value, kind) or isinstance(value, bool):
            raise ClusterAnswer(
                f"OpenSearch at {self.url} answered {call} "
                f"{'with an unusable' if found else 'without'} {'.'.join(keys)} "
                f"(got {one_line(json.dumps(answer, default=repr), 200)}); "
                "is opensearch.url an OpenSearch 2.x cluster?"
            )
        return value

    def settings(self, index: str) -> dict[str, str]:
        """The manifest's settings as the cluster holds them for ``index`` (defaults
        included)."""
        call = f"GET /{index}/_settings"
        answer = self.ask(
            call,
            self.client.indices.get_settings,
            index=index,
            params={"include_defaults": "true", "flat_settings": "true"},
        )
        found = self.field(answer, call, index, kind=Mapping)
        merged = {**found.get("defaults", {}), **found.get("settings", {})}
        return {param: str(merged.get(setting)) for param, setting in SETTINGS.items()}

    def segments(self, index: str) -> int:
        """The segments of ``index``'s primary shards: its ``_cat/segments`` rows marked ``p``
        (each replica holds segments of its own, merged on its own)."""
        call = f"GET /_cat/segments/{index}"
        rows = self.ask(call, self.client.cat.segments, index=index, params={"format": "json"})
        if not isinstance(rows, list):
            raise ClusterAnswer(
                f"OpenSearch at {self.url} answered {call}?format=json with "
                f"{one_line(rows, 200)}, not a list of segment rows"
            )
        return sum(1 for row in rows if self.field(row, call, "prirep") == "p")

    def delete(self, index: str) -> None:
        """Delete ``index`` where it exists (a rebuilt prep starts from a fresh index)."""
        self.ask(
            f"DELETE /{index}",
            self.client.indices.delete,
            index=index,
            params={"ignore_unavailable": "true"},
        )

    def refresh(self, index: str) -> None:
        """Make what was indexed searchable: each refresh writes the shard's new segment."""
        self.ask(f"POST /{index}/_refresh", self.client.indices.refresh, index=index)


def receipt(path: Path, **fields: Any) -> None:
    """A prep's cached artifact: what it left on the cluster, for the next stage to check."""
    path.write_text(json.dumps(fields, sort_keys=True))


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
        cluster = Cluster(p["opensearch.url"])
        name = (
            "bench-" + hashlib.sha256(json.dumps(dict(p), sort_keys=True).encode()).hexdigest()[:16]
        )
        cluster.delete(name)
        settings = {setting: p[param] for param, setting in SETTINGS.items()}
        cluster.ask(
            f"PUT /{name}",
            cluster.client.indices.create,
            index=name,
            body={"settings": settings, "mappings": {"properties": {"body": {"type": "text"}}}},
        )
        docs = list(corpus(p["corpus.n_docs"], p["corpus.seed"]))
        for start in range(0, len(docs), p["bulk.batch_size"]):
            batch = docs[start : start + p["bulk.batch_size"]]
            actions = ({"_index": name, "_id": rowid, "body": body} for rowid, body in batch)
            cluster.ask("POST /_bulk", bulk, cluster.client, actions)
            cluster.refresh(name)
        cluster.ask(
            f"PUT /{name}/_settings",
            cluster.client.indices.put_settings,
            index=name,
            body={"index.blocks.write": True},
        )
        call.effective.update(cluster.settings(name))
        receipt(call.artifacts["loaded"], index=name, docs=len(docs), url=p["opensearch.url"])
        return {"segments": float(cluster.segments(name))}

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
        cluster = Cluster(call.params["opensearch.url"])
        clone = f"{loaded['index']}-m{target_segments}"
        cluster.delete(clone)
        cluster.ask(
            f"PUT /{loaded['index']}/_clone/{clone}",
            cluster.client.indices.clone,
            index=loaded["index"],
            target=clone,
            params={"wait_for_active_shards": "1"},
        )
        if target_segments != "none":
            cluster.ask(
                f"POST /{clone}/_forcemerge",
                cluster.client.indices.forcemerge,
                index=clone,
                params={"max_num_segments": str(target_segments)},
            )
        cluster.refresh(clone)
        call.effective["merge.max_num_segments"] = target_segments
        receipt(
            call.artifacts["merged"],
            index=clone,
            docs=loaded["docs"],
            url=call.params["opensearch.url"],
        )
        return {"segments": float(cluster.segments(clone))}

    @measure(
        needs=["merge"],
        params=["opensearch.url", "n_queries", "query.seed"],
        metrics=["p50_ms", "p95_ms", "results_hash", "segments"],
    )
    def search(self, call: StageCall) -> dict[str, float]:
        """Check the cached index is still there, warm up, then time each match query."""
        merged = json.loads(call.artifacts["merged"].read_text())
        cluster = Cluster(call.params["opensearch.url"])
        index = merged["index"]
        held = None
        if cluster.ask(f"HEAD /{index}", cluster.client.indices.exists, index=index):
            count = f"GET /{index}/_count"
            answer = cluster.ask(
                count, cluster.client.count, index=index, params={"ignore_unavailable": "true"}
            )
            held = cluster.field(answer, count, "count", kind=int)
        if held != merged["docs"]:
            raise ClusterAnswer(
                f"index {index} on {merged['url']} holds {held} documents, not "
                f"the {merged['docs']} its cache entry recorded (deleted or "
                "changed on the cluster); remove that cache entry (benchmark "
                "data cache/) so the preps rebuild it"
            )
        call.effective.update(cluster.settings(index))
        queries = self._queries(
            cluster, index, call.params["n_queries"], call.params["query.seed"], merged["docs"]
        )
        search = f"POST /{index}/_search"
        for query in queries:
            cluster.ask(search, cluster.client.search, index=index, body=query)
        times, answers = [], []
        for query in queries:
            start = time.perf_counter_ns()
            answers.append(cluster.ask(search, cluster.client.search, index=index, body=query))
            times.append((time.perf_counter_ns() - start) / 1e6)
        digest = hashlib.sha256()
        for answer in answers:
            hits = cluster.field(answer, search, "hits", "hits", kind=list)
            # ties in score may come in any order (it follows the segments): compare as sets
            ranked = sorted(
                (
                    round(cluster.field(hit, search, "_score", kind=(int, float)), 4),
                    cluster.field(hit, search, "_id", kind=str),
                )
                for hit in hits
            )
            digest.update(repr(ranked).encode())
        return {
            "p50_ms": percentile(times, 0.5),
            "p95_ms": percentile(times, 0.95),
            "results_hash": int(digest.hexdigest()[:13], 16),
            "segments": float(cluster.segments(index)),
        }

    @staticmethod
    def _queries(
        cluster: Cluster, index: str, count: int, seed: int, docs: int
    ) -> list[Mapping[str, Any]]:
        """Match queries of 1-3 words of a random document each, top 10."""
        rng = random.Random(seed)
        queries = []
        for _ in range(count):
            doc_id = rng.randint(1, docs)
            call = f"GET /{index}/_doc/{doc_id}"
            answer = cluster.ask(call, cluster.client.get, index=index, id=doc_id)
            body = cluster.field(answer, call, "_source", "body", kind=str)
            words = rng.sample(body.split(), rng.randint(1, 3))
            queries.append(
                {
                    "size": 10,
                    "track_total_hits": False,
                    "query": {"match": {"body": " ".join(words)}},
                }
            )
        return queries
