"""The typed reference domains, registered as entry points of ``pytest_benchmark_agent.domains``.

``seismic`` (learned-sparse retrieval with SEISMIC), ``sqlite_fts5`` (FTS5 segment merging),
``postgres`` (a real PostgreSQL server: an index against query latency) and ``opensearch``
(force-merge against search latency on a cluster). Each module imports its system's client only
inside its stage methods, so listing or compiling a domain needs none of them installed.
"""
