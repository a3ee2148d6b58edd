"""From a gate-1-clean config to concrete work: prep nodes with signatures, and trials in order.

A prep node is one prep stage bound to the param values it uses; its **signature** hashes what
could change its output: the command (with needed artifacts named by their producers'
signatures, so the home folder's location does not matter), the values of the params it uses,
the signatures of what it needs, the content of its ``inputs:``, its folder and environment.
Two treatments that bind a prep identically share one node, so it is built once.

Trials are ordered in blocks: replicate k of every treatment runs adjacent, so slow drift of
the machine hits every treatment alike and the analysis can pair within blocks. The order inside
a block is balanced (:func:`block_orders`): two treatments alternate (A B, then B A), more follow
the rows of a Williams Latin square, shuffled per cycle with a seed from the benchmark's name, so
over each cycle every treatment runs at every position equally often and a position effect (the
first run of a block slower) cancels instead of becoming a treatment effect. Each trial's
``position`` (0-based index within its block as run) is in its record.
A file of one configuration (no ``treatment_variable``) has one treatment, labelled
:data:`ONE_CONFIGURATION` (``default``): a block is one trial, there is nothing to interleave,
and its trial ids read ``search[default-rep2]``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import (
    BenchmarkConfig,
    one_configuration,
    treatment_values,
    treatment_variable,
)
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.engine.revisions import CODE, Revision, Revisions
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import NotRegularFile, file_kind, regular_chunks
from pytest_benchmark_agent.util.placeholders import as_text, names_in, render
from pytest_benchmark_agent.util.safetext import one_line

#: Bumped when the meaning of a signature changes, so old cache entries are never reused.
SIGNATURE_VERSION = 1
#: The label of the one treatment of a file of one configuration: its control, its trial ids
#: (``search[default-rep0]``, selected with ``-k default``) and its column in the summary.
ONE_CONFIGURATION = "default"


@dataclass(frozen=True)
class PrepNode:
    """One prep stage bound to concrete values; identified (and cached) by its signature."""

    stage: Stage
    signature: str
    needs: tuple[PrepNode, ...]
    params_used: dict[str, Any]
    seed: int | None
    cwd: Path
    inputs: tuple[Path, ...]
    #: The root of the checkout its code comes from (``{checkout}``, ``$BENCH_CHECKOUT``).
    checkout: Path | None = None

    @property
    def fixture_name(self) -> str:
        """The session-scoped fixture that builds or reuses this node."""
        return f"bench_prep_{_identifier(self.stage.name)}_{self.signature[:12]}"


@dataclass(frozen=True)
class TrialSpec:
    """One test item: a measure stage for one treatment, replicate (block) and seed."""

    stage: Stage
    treatment: Any
    replicate: int
    seed: int | None
    params: dict[str, Any]
    needs: tuple[PrepNode, ...]
    cwd: Path
    position: int = 0  # index of the trial within its block (replicate) as run
    #: The root of the checkout its code comes from (``{checkout}``, ``$BENCH_CHECKOUT``).
    checkout: Path | None = None

    @property
    def treatment_label(self) -> str:
        return as_text(self.treatment)

    def test_name(self, variable: str | None) -> str:
        """The contract's id: ``search[fts.merge=optimize-rep2]`` (``-seed3`` with seeds);
        ``search[default-rep2]`` for one configuration (``variable`` None). The label is
        printable (:func:`.safetext.one_line`): pytest prints the id as it is, in a failure's
        header and its summary line, so a label's escape sequence would reach the terminal."""
        suffix = f"-seed{self.seed}" if self.seed is not None else ""
        label = one_line(self.treatment_label)
        treatment = label if variable is None else f"{variable}={label}"
        return f"{self.stage.name}[{treatment}-rep{self.replicate}{suffix}]"


@dataclass
class BenchPlan:
    """Everything a benchmark file will run, known before the first trial."""

    config: BenchmarkConfig
    path: Path
    #: The treatment variable; None for one configuration (``treatments == [ONE_CONFIGURATION]``).
    variable: str | None
    treatments: list[Any]
    trials: list[TrialSpec]
    preps: dict[str, PrepNode] = field(default_factory=dict)  # signature -> node
    #: Params a signature holds only keyed (:func:`redact.keyed_params`), never in clear.
    keyed: frozenset[str] = frozenset()
    #: ``--bench-against``: the two revisions, and the (control, treatment) label pairs that
    #: compare them, one per treatment of the file's own (one pair for one configuration).
    revisions: Revisions | None = None
    revision_pairs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def control(self) -> Any:
        return self.treatments[0]


#: The treatment variable of a tuning round, whose treatments are points of the search space.
POINT = "point"


def point_label(point: dict[str, Any]) -> str:
    """``heap_factor=0.6,query_cut=10``: a tuning point as a treatment label."""
    return ",".join(f"{name}={as_text(value)}" for name, value in point.items())


@dataclass(frozen=True)
class _Arm:
    """One treatment as bound: its params, the file whose stages it runs, where they run."""

    treatment: Any
    params: dict[str, Any]
    config: BenchmarkConfig
    folder: Path
    checkout: Path
    revision: Revision | None = None


def build_plan(
    config: BenchmarkConfig,
    path: Path,
    points: list[dict[str, Any]] | None = None,
    revisions: Revisions | None = None,
    against_config: BenchmarkConfig | None = None,
) -> BenchPlan:
    """Bind every stage to every treatment and seed; dedupe preps by signature.

    ``points`` makes this a tuning round: each point (values of the tuned params) is one
    treatment of the synthetic variable ``point``, the first being the incumbent. A file of one
    configuration binds its params as declared, as the one treatment ``default``.
    ``revisions`` (``--bench-against``) makes every treatment run under both revisions, REV's
    first (the control): the variable is ``code``, a treatment's label REV's or HEAD's short
    commit id (``1a2b3c4d5e6f,mode=fast`` with a treatment variable of the file's own), and
    each side's stages run in its checkout, REV's from ``against_config`` when given.
    """
    variable, treatments, bindings = _treatments(config, points)
    folder = path.parent.resolve()
    checkout = checkout_of(folder)
    arms = [_Arm(t, b, config, folder, checkout) for t, b in zip(treatments, bindings, strict=True)]
    pairs: list[tuple[str, str]] = []
    if revisions is not None:
        arms, pairs = _revision_arms(arms, variable, revisions, against_config or config)
        variable = CODE
    hasher = _InputHasher()
    plan = BenchPlan(config, path, variable, [arm.treatment for arm in arms], trials=[])
    plan.revisions, plan.revision_pairs = revisions, pairs
    plan.keyed = redact.keyed_params(config)
    seeds: list[int | None] = list(config.seeds) if config.seeds is not None else [None]
    by_names = [{stage.name: stage for stage in arm.config.stages} for arm in arms]
    measures = [[s for s in arm.config.stages if s.kind == "measure"] for arm in arms]
    orders = block_orders(len(arms), config.max_replicates, order_seed(config))
    for replicate, order in enumerate(orders):
        position = 0
        for seed in seeds:
            for index in order:
                arm, by_name = arms[index], by_names[index]
                for stage in measures[index]:
                    nodes = tuple(
                        _bind(by_name[need], arm, seed, by_name, hasher, plan)
                        for need in stage.needs
                    )
                    plan.trials.append(
                        TrialSpec(
                            stage,
                            arm.treatment,
                            replicate,
                            seed,
                            arm.params,
                            nodes,
                            _stage_dir(stage, arm.params, seed, arm.folder),
                            position,
                            arm.checkout,
                        )
                    )
                    position += 1
    return plan


def _treatments(
    config: BenchmarkConfig, points: list[dict[str, Any]] | None
) -> tuple[str | None, list[Any], list[dict[str, Any]]]:
    """The treatment variable, its values and each value's param binding."""
    if points is not None:
        return POINT, [point_label(p) for p in points], [{**config.params, **p} for p in points]
    if one_configuration(config):
        return None, [ONE_CONFIGURATION], [dict(config.params)]
    name = treatment_variable(config)
    assert name is not None, "gate 1 guarantees a treatment variable"
    values = treatment_values(config)
    return name, values, [{**config.params, name: t} for t in values]


def _revision_arms(
    arms: list[_Arm], variable: str | None, revisions: Revisions, against: BenchmarkConfig
) -> tuple[list[_Arm], list[tuple[str, str]]]:
    """Every treatment under REV (first: the control) and under the working tree; the label
    pairs that compare the two revisions, one per treatment."""
    sides: dict[str, list[_Arm]] = {}
    for revision in (revisions.against, revisions.this):
        own = against if revision is revisions.against else arms[0].config
        for arm in arms:
            label = revision.label
            if variable is not None:
                label += f",{variable}={as_text(arm.treatment)}"
            params = arm.params
            if own is not arm.config:  # REV's own file: its params, the treatment's value
                params = {**own.params, **({variable: arm.treatment} if variable else {})}
            sides.setdefault(revision.sha, []).append(
                _Arm(label, params, own, revision.folder, revision.root, revision)
            )
    control, this = sides[revisions.against.sha], sides[revisions.this.sha]
    return control + this, [(c.treatment, t.treatment) for c, t in zip(control, this, strict=True)]


def checkout_of(folder: Path) -> Path:
    """The root of the git checkout holding ``folder`` (the nearest folder above it with a
    ``.git`` entry), else ``folder`` itself: what ``{checkout}`` means without --bench-against."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def order_seed(config: BenchmarkConfig) -> int:
    """The seed of the within-block order: the benchmark's name, so a rerun runs the same order."""
    return zlib.crc32(config.name.encode())


def block_orders(treatments: int, blocks: int, seed: int) -> list[list[int]]:
    """The order of the treatments (indexes, 0 the control) inside each of ``blocks`` blocks.

    Two alternate: [0, 1], [1, 0], [0, 1], ... More cycle through the rows of a Williams square
    (each treatment once per position, and each ordered pair adjacent equally often; an odd
    count adds the mirrored rows), the rows of each cycle shuffled by ``seed`` and the cycle.
    """
    if treatments <= 1:
        return [[0] * treatments for _ in range(blocks)]
    first = [0]
    low, high = 1, treatments - 1
    while len(first) < treatments:
        first.append(low)
        low += 1
        if len(first) < treatments:
            first.append(high)
            high -= 1
    rows = [[(value + shift) % treatments for value in first] for shift in range(treatments)]
    if treatments % 2:
        rows += [row[::-1] for row in rows]
    orders: list[list[int]] = []
    cycle = 0
    while len(orders) < blocks:
        batch = [list(row) for row in rows]
        if treatments > 2:
            random.Random(f"{seed}:{cycle}").shuffle(batch)
        orders.extend(batch)
        cycle += 1
    return orders[:blocks]


def _bind(
    stage: Stage,
    arm: _Arm,
    seed: int | None,
    by_name: dict[str, Stage],
    hasher: _InputHasher,
    plan: BenchPlan,
) -> PrepNode:
    params = arm.params
    needs = tuple(_bind(by_name[n], arm, seed, by_name, hasher, plan) for n in stage.needs)
    used = _names_used(stage)
    params_used = {name: params[name] for name in sorted(used) if name in params}
    cwd = _stage_dir(stage, params, seed, arm.folder)
    inputs = tuple(
        cwd / render(text, {**params, "seed": seed}, quote=False) for text in stage.inputs
    )
    hidden = {k: redact.keyed(as_text(params[k])) for k in plan.keyed if k in params}
    symbolic = _symbolic(stage, params, hidden, seed, needs)
    payload = {
        "version": SIGNATURE_VERSION,
        "stage": stage.name,
        "produces": stage.produces,
        "cmd": render(stage.cmd or "", symbolic, quote=False),
        "env": {
            k: redact.keyed_env(k, render(v, symbolic, quote=False))
            for k, v in sorted(stage.env.items())
        },
        "params": {k: hidden.get(k, as_text(v)) for k, v in params_used.items()},
        "seed": seed if "seed" in used else None,
        "needs": [dep.signature for dep in needs],
        "inputs": {_where(p, arm): hasher.digest(p, plan.path, stage.name) for p in inputs},
        "wdir": _where(cwd, arm),
    }
    if arm.revision is not None and (not inputs or "checkout" in used):
        payload["tree"] = arm.revision.tree  # it may read anything in its checkout
    signature = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    node = plan.preps.get(signature)
    if node is None:
        node = PrepNode(
            stage,
            signature,
            needs,
            params_used,
            seed if "seed" in used else None,
            cwd,
            inputs,
            arm.checkout,
        )
        plan.preps[signature] = node
    return node


def _symbolic(
    stage: Stage,
    params: dict[str, Any],
    hidden: dict[str, str],
    seed: int | None,
    needs: tuple[PrepNode, ...],
) -> dict[str, Any]:
    """The values a prep's command is rendered with for its signature: params (a keyed one by
    its keyed digest), the seed, and placeholders for the scratch folder, the checkout and
    every artifact (an upstream one by its producer's signature), never a real path."""
    upstream = {
        a: f"<artifact {dep.signature}:{a}>"
        for dep in closure_nodes(needs)
        for a in dep.stage.produces
    }
    return {
        **params,
        **hidden,
        "seed": seed,
        "out": "<out>",
        "checkout": "<checkout>",
        **upstream,
        **{a: f"<own:{a}>" for a in stage.produces},
    }


def _where(path: Path, arm: _Arm) -> str:
    """A path as a signature holds it: absolute, or under a revision relative to its checkout
    (the checkout's own location must not tell two equal revisions apart)."""
    if arm.revision is None:
        return str(path)
    try:
        return "<checkout>/" + path.resolve().relative_to(arm.checkout).as_posix()
    except ValueError:
        return str(path)


def closure_nodes(nodes: tuple[PrepNode, ...]) -> list[PrepNode]:
    """Every node in ``nodes`` and what they need, each once."""
    seen: dict[str, PrepNode] = {}
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.signature not in seen:
            seen[node.signature] = node
            stack.extend(node.needs)
    return list(seen.values())


def _names_used(stage: Stage) -> set[str]:
    texts = [stage.cmd or "", *stage.inputs, *stage.env.values(), stage.wdir or ""]
    return {name for text in texts for name in names_in(text)}


def _stage_dir(stage: Stage, params: dict[str, Any], seed: int | None, folder: Path) -> Path:
    if not stage.wdir:
        return folder
    return (folder / render(stage.wdir, {**params, "seed": seed}, quote=False)).resolve()


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


class _InputHasher:
    """Content hashes of input files and folders, each computed once per plan."""

    def __init__(self) -> None:
        self._memo: dict[Path, str] = {}

    def digest(self, path: Path, config_path: Path, stage: str) -> str:
        if path not in self._memo:
            if not path.exists():
                raise ConfigError(
                    config_path,
                    [
                        (
                            f"stages ({stage}).inputs",
                            f"'{path}' does not exist.",
                            "fix the path or the params in it.",
                        )
                    ],
                )
            try:
                self._memo[path] = content_hash(path)
            except OSError as error:
                raise ConfigError(
                    config_path,
                    [
                        (
                            f"stages ({stage}).inputs",
                            f"'{error.filename or path}' cannot be read ({error.strerror}).",
                            "make it readable or fix the path.",
                        )
                    ],
                ) from None
        return self._memo[path]


def content_hash(path: Path) -> str:
    """sha256 of a file, or of a folder's relative paths and file contents (sorted).

    Regular files only are read, never blocking (:func:`regular_chunks`): a FIFO, socket or
    device (or a link to one, such as ``/dev/zero``) counts by its name and type, so an input
    folder holding one neither hangs the plan nor hashes endless bytes.
    """
    if not path.is_dir():
        return _file_hash(path)
    digest = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if not p.is_dir()):
        if child.is_file():
            digest.update(str(child.relative_to(path)).encode() + b"\0")
            digest.update(_file_hash(child).encode())
        elif child.exists():  # a special file (a dangling link counts as absent, as before)
            kind = file_kind(child.stat().st_mode, child.is_symlink())
            digest.update(str(child.relative_to(path)).encode() + f"\0<{kind}>".encode())
    return digest.hexdigest()


def _file_hash(path: Path) -> str:
    """sha256 of a regular file's content, or of ``<fifo>`` (its type) for a special file."""
    digest = hashlib.sha256()
    try:
        for chunk in regular_chunks(path):
            digest.update(chunk)
    except NotRegularFile as error:
        digest.update(f"<{error.kind}>".encode())
    return digest.hexdigest()


def describe_binding(node: PrepNode) -> str:
    """``build(corpus.n_docs=20000)``: a prep and the values it was bound to, for reports."""
    values = ", ".join(f"{k}={as_text(v)}" for k, v in node.params_used.items())
    return f"{node.stage.name}({values})"


__all__ = [
    "ONE_CONFIGURATION",
    "BenchPlan",
    "PrepNode",
    "TrialSpec",
    "block_orders",
    "build_plan",
    "closure_nodes",
    "content_hash",
    "describe_binding",
]
