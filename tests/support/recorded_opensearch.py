"""A recorded OpenSearch cluster: a real HTTP server on ``127.0.0.1`` that answers the REST calls
of the ``opensearch`` domain with the responses recorded in ``tests/data/opensearch/`` (from the
OpenSearch 2.18 documentation; ``PROVENANCE.md`` there names each page).

Test double, not a search engine. It keeps the state the domain's flow depends on (indices with
their flat settings, documents, segments per shard, the write block that ``_clone`` requires),
fills the recorded shapes from it, and logs every request so tests assert on what the domain sent.
No background merges: a loaded index holds one segment per refresh that indexed documents, and
``_forcemerge?max_num_segments=N`` leaves at most N. A match query scores a document by how many of
the query's words it holds (so ties abound); ties come back in the order of the segments they sit
in, newest segment first while an index holds several and by id once it holds one, so the two
treatments disagree on the order of ties as a real cluster may. ``fault`` makes an endpoint answer
a given status and body instead; ``forget`` drops an index as someone else's ``DELETE`` would.
Two nodes, as in the documentation's ``_cat/segments`` example: one replica per shard is
allocated, and listed with ``prirep`` ``r``.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

DATA = Path(__file__).resolve().parents[1] / "data" / "opensearch"
#: The nodes' addresses in the recorded ``_cat/segments`` rows (primary, then replica).
NODES = ("172.18.0.4", "172.18.0.3")


def recorded(name: str) -> Any:
    """The recorded response ``tests/data/opensearch/<name>.json``, a fresh copy to fill in."""
    return json.loads((DATA / f"{name}.json").read_text())


@dataclass
class Request:
    """One request as the cluster received it (``body``: parsed JSON, or NDJSON lines)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class Index:
    """What the cluster holds for one index."""

    settings: dict[str, str]
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    segments: int = 0  # per shard
    unrefreshed: int = 0  # documents indexed since the last refresh

    @property
    def shards(self) -> int:
        return int(self.settings.get("index.number_of_shards", "1"))

    @property
    def replicas(self) -> int:
        """Replicas allocated: one node besides the primary's can hold a copy."""
        return min(int(self.settings.get("index.number_of_replicas", "1")), len(NODES) - 1)


class Refusal(Exception):
    """An error answer: ``status`` and the recorded error envelope filled in."""

    def __init__(self, status: int, kind: str, reason: str, **extra: str):
        body = recorded("error")
        cause = {"type": kind, "reason": reason, **extra}
        body["error"] = {"root_cause": [cause], **cause}
        body["status"] = status
        super().__init__(reason)
        self.status, self.body = status, body


def _text(value: Any) -> str:
    """A setting's value as OpenSearch returns it (``true``, ``10``, ``5gb``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested settings as flat ``a.b.c`` keys, the form ``flat_settings=true`` answers with."""
    flat: dict[str, str] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = _text(value)
    return flat


def _shards(index: Index) -> dict[str, int]:
    """The ``_shards`` block of a broadcast answer (refresh, force merge) for ``index``."""
    answer = recorded("forcemerge")["_shards"]
    answer.update(
        total=index.shards * (1 + int(index.settings.get("index.number_of_replicas", "1"))),
        successful=index.shards * (1 + index.replicas),
        failed=0,
    )
    return answer


def _missing(name: str) -> Refusal:
    return Refusal(
        404,
        "index_not_found_exception",
        f"no such index [{name}]",
        index=name,
        **{"resource.type": "index_or_alias", "resource.id": name, "index_uuid": "_na_"},
    )


class RecordedCluster:
    """The server and its state; use as a context manager (``with RecordedCluster() as c``)."""

    def __init__(self) -> None:
        self.indices: dict[str, Index] = {}
        self.requests: list[Request] = []
        self.faults: dict[str, tuple[int, Any]] = {}
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.cluster = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordedCluster:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def fault(self, endpoint: str, status: int, body: Any) -> None:
        """Answer every request to ``endpoint`` (``_search``, ``_forcemerge``) with this."""
        self.faults[endpoint] = (status, body)

    def forget(self, name: str) -> None:
        """Drop an index, as a ``DELETE`` from someone else would."""
        with self.lock:
            del self.indices[name]

    def calls(self, endpoint: str) -> list[Request]:
        """The logged requests whose path names ``endpoint`` (``_search``, ``_clone``)."""
        with self.lock:
            return [r for r in self.requests if endpoint in r.path.split("/")]

    def handle(self, method: str, target: str, raw: bytes) -> tuple[int, Any]:
        """Log the request, then answer it: ``(status, body)``; ``None`` is no body."""
        url = urlsplit(target)
        parts = [unquote(part) for part in url.path.split("/") if part]
        query = dict(parse_qsl(url.query))
        text = raw.decode()
        if parts[-1:] == ["_bulk"]:
            body: Any = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            body = json.loads(text) if text else None
        with self.lock:
            self.requests.append(Request(method, url.path, query, body))
            for endpoint, answer in self.faults.items():
                if endpoint in parts:
                    return answer
            try:
                return 200, self._answer(method, parts, query, body)
            except Refusal as refusal:
                return refusal.status, refusal.body

    def _index(self, name: str) -> Index:
        if name not in self.indices:
            raise _missing(name)
        return self.indices[name]

    def _answer(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> Any:
        match method, parts:
            case "GET", []:
                return recorded("info")
            case "HEAD", [name]:
                self._index(name)
                return None
            case "DELETE", [name]:
                if (
                    self.indices.pop(name, None) is None
                    and query.get("ignore_unavailable") != "true"
                ):
                    raise _missing(name)
                return recorded("acknowledged")
            case "PUT", [name]:
                return self._create(name, body)
            case "POST", ["_bulk"]:
                return self._bulk(body)
            case "POST", [name, "_refresh"]:
                index = self._index(name)
                if index.unrefreshed:
                    index.segments, index.unrefreshed = index.segments + 1, 0
                return {"_shards": _shards(index)}
            case "PUT", [name, "_settings"]:
                self._index(name).settings.update(_flat(body))
                return recorded("acknowledged")
            case "GET", [name, "_settings"] if query.get("flat_settings") == "true":
                return self._settings(name, query.get("include_defaults") == "true")
            case "GET", ["_cat", "segments", name] if query.get("format") == "json":
                return self._segments(name)
            case "PUT", [name, "_clone", target]:
                return self._clone(name, target)
            case "POST", [name, "_forcemerge"]:
                index = self._index(name)
                if "max_num_segments" in query:
                    index.segments = min(index.segments, int(query["max_num_segments"]))
                return {"_shards": _shards(index)}
            case "GET" | "POST", [name, "_count"]:
                answer = recorded("count")
                answer.update(count=len(self._index(name).docs), _shards=_shards(self._index(name)))
                return answer
            case "GET", [name, "_doc", doc_id] if doc_id in self._index(name).docs:
                answer = recorded("get_document")
                answer.update(_index=name, _id=doc_id, _source=self._index(name).docs[doc_id])
                return answer
            case "GET" | "POST", [name, "_search"]:
                return self._search(name, body)
        raise Refusal(
            400,
            "illegal_argument_exception",
            f"no recorded response for {method} /{'/'.join(parts)} {query}",
        )

    def _create(self, name: str, body: dict[str, Any]) -> Any:
        if name in self.indices:
            raise Refusal(
                400,
                "resource_already_exists_exception",
                f"index [{name}] already exists",
                index=name,
            )
        settings = {"index.number_of_shards": "1", "index.number_of_replicas": "1"}
        settings.update(_flat((body or {}).get("settings", {})))
        self.indices[name] = Index(settings)
        answer = recorded("clone")  # the create and clone (resize) answers share one shape
        answer["index"] = name
        return answer

    def _bulk(self, lines: list[dict[str, Any]]) -> Any:
        answer, item = recorded("bulk"), recorded("bulk")["items"][0]["index"]
        answer.update(errors=False, items=[])
        for action, source in zip(lines[::2], lines[1::2], strict=True):
            meta = action["index"]
            index = self._index(meta["_index"])
            index.docs[str(meta["_id"])] = source
            index.unrefreshed += 1
            done = copy.deepcopy(item)
            done.update(_index=meta["_index"], _id=str(meta["_id"]), _shards=_shards(index))
            answer["items"].append({"index": done})
        return answer

    def _settings(self, name: str, defaults: bool) -> Any:
        template = recorded("get_settings")["sample-index1"]
        settings = {**_flat(template["settings"]), "index.provided_name": name}
        settings.update(self._index(name).settings)
        found: dict[str, Any] = {"settings": settings}
        if defaults:
            found["defaults"] = {
                "index.merge.policy.segments_per_tier": "10.0",
                "index.merge.policy.max_merged_segment": "5gb",
                "index.merge.policy.floor_segment": "2mb",
                "index.merge.scheduler.max_thread_count": "1",
                "index.refresh_interval": "1s",
            }
        return {name: found}

    def _segments(self, name: str) -> list[dict[str, str]]:
        index, template = self._index(name), recorded("cat_segments")[0]
        rows = []
        for shard in range(index.shards):
            for copy_number in range(1 + index.replicas):
                for generation in range(index.segments):
                    row = dict(template)
                    row.update(
                        index=name,
                        shard=str(shard),
                        prirep="p" if copy_number == 0 else "r",
                        ip=NODES[copy_number],
                        segment=f"_{generation}",
                        generation=str(generation),
                    )
                    row["docs.count"] = str(len(index.docs) // max(index.segments, 1))
                    rows.append(row)
        return rows

    def _clone(self, name: str, target: str) -> Any:
        source = self._index(name)
        if source.settings.get("index.blocks.write") != "true":
            raise Refusal(
                500,
                "illegal_state_exception",
                f'index {name} must be read-only to resize index. use "index.blocks.write=true"',
            )
        if target in self.indices:
            raise Refusal(
                400,
                "resource_already_exists_exception",
                f"index [{target}] already exists",
                index=target,
            )
        self.indices[target] = Index(dict(source.settings), dict(source.docs), source.segments)
        answer = recorded("clone")
        answer["index"] = target
        return answer

    def _search(self, name: str, body: dict[str, Any]) -> Any:
        index = self._index(name)
        words = set(body["query"]["match"]["body"].split())
        scored = []
        for doc_id, source in index.docs.items():
            score = float(len(words & set(source["body"].split())))
            if score:
                scored.append((score, int(doc_id)))
        # which documents make the page does not depend on the segments; their order does
        page = sorted(scored, key=lambda hit: (-hit[0], hit[1]))[: body.get("size", 10)]
        newest_first = -1 if index.segments > 1 else 1
        page.sort(key=lambda hit: (-hit[0], newest_first * hit[1]))
        answer = recorded("search")
        hit = answer["hits"]["hits"][0]
        hits = [
            {
                **hit,
                "_index": name,
                "_id": str(doc_id),
                "_score": score,
                "_source": index.docs[str(doc_id)],
            }
            for score, doc_id in page
        ]
        answer["_shards"].update(total=index.shards, successful=index.shards)
        answer["hits"].update(max_score=page[0][0] if page else None, hits=hits)
        if body.get("track_total_hits") is False:
            del answer["hits"]["total"]
        else:
            answer["hits"]["total"] = {"value": len(scored), "relation": "eq"}
        return answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    cluster: RecordedCluster


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, as ``opensearch-py``'s connection pool expects; no Nagle delay
    (headers and body go out in two writes, which would otherwise wait for a delayed ACK)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        status, body = self.server.cluster.handle(
            self.command, self.path, self.rfile.read(length) if length else b""
        )
        data = b"" if body is None or self.command == "HEAD" else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _reply

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the cluster's own request log is what tests read."""
