"""Python Domains: a benchmark's stages written as methods of a class.

A Domain's methods marked ``@prep(...)`` / ``@measure(...)`` compile to ordinary command stages
whose command runs that one method in a fresh interpreter
(``python -m pytest_benchmark_agent.domains.runner MODULE:CLASS METHOD --param ...``). So a
Domain's stages are the same session-scoped, signature-cached fixtures as shell stages, under
the same gates, guards, xdist scheduling and records: there is no second engine. Each compiled
stage passes exactly the params its method declares (so the cache signature holds them and
nothing else) and carries in its environment (``BENCH_STAGE_SOURCE``) the sha256 of its
source: the method's own, and that of every function, class and literal constant of the same
module it uses, by name, directly or through them (:func:`stage_source`). Editing one method
rebuilds that stage and what depends on it, and nothing else; code in other modules and data
files a method relies on are declared with ``inputs=``.

A Domain also brings a **manifest** (the params a fair comparison depends on, each with its
default and why), default metric specs and resources; the benchmark file may override the
metric specs and resources and must declare every manifest param (gate 1).

Registration: :func:`register_domain` in-process (a ``conftest.py``), or an entry point of the
group ``pytest_benchmark_agent.domains``; ``domain:`` may also name a class directly as
``package.module:Class`` or ``path/to/file.py:Class``.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Literal

from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import BenchmarkConfig, ManifestEntry
from pytest_benchmark_agent.config.recipe import merge_metrics, merge_resources
from pytest_benchmark_agent.config.resources import Resources
from pytest_benchmark_agent.config.stage import MetricsFrom, Stage
from pytest_benchmark_agent.errors import BenchError, ConfigError

ENTRY_POINT_GROUP = "pytest_benchmark_agent.domains"
#: The environment variable of a compiled stage holding its method's source hash.
SOURCE_ENV = "BENCH_STAGE_SOURCE"
RUNNER = "pytest_benchmark_agent.domains.runner"
_NAME = re.compile(r"^[A-Za-z_][\w.@\-]*$")
_STAGE_ATTR = "__bench_stage__"


class DomainDefinitionError(BenchError):
    """A Domain class that cannot be compiled as written (a bug of the domain, not the file)."""


@dataclass(frozen=True)
class StageSpec:
    """What a ``@prep`` / ``@measure`` decorator declared about one method."""

    kind: Literal["prep", "measure"]
    produces: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    seed: bool = False
    mem_mb: float | None = None
    gpus: int | None = None
    vram_mb: float | None = None
    timeout_s: float | None = None


def prep(
    *,
    produces: list[str] | tuple[str, ...] = (),
    needs: list[str] | tuple[str, ...] = (),
    params: list[str] | tuple[str, ...] = (),
    inputs: list[str] | tuple[str, ...] = (),
    seed: bool = False,
    mem_mb: float | None = None,
    gpus: int | None = None,
    vram_mb: float | None = None,
    timeout_s: float | None = None,
) -> Callable:
    """Mark a method as a prep stage: cached by signature, building the artifacts it produces.

    ``params`` are the only params the method may read (they make its signature); ``needs``
    name the stage methods whose artifacts it reads; ``inputs`` are files (relative to the
    domain's module) whose content is part of the signature; ``seed=True`` binds it per seed.
    """
    return _mark(
        StageSpec(
            "prep",
            tuple(produces),
            tuple(needs),
            tuple(params),
            (),
            tuple(inputs),
            seed,
            mem_mb,
            gpus,
            vram_mb,
            timeout_s,
        )
    )


def measure(
    *,
    metrics: list[str] | tuple[str, ...],
    needs: list[str] | tuple[str, ...] = (),
    params: list[str] | tuple[str, ...] = (),
    inputs: list[str] | tuple[str, ...] = (),
    seed: bool = False,
    mem_mb: float | None = None,
    gpus: int | None = None,
    vram_mb: float | None = None,
    timeout_s: float | None = None,
) -> Callable:
    """Mark a method as a measure stage: re-run for every trial, returning ``metrics``."""
    return _mark(
        StageSpec(
            "measure",
            (),
            tuple(needs),
            tuple(params),
            tuple(metrics),
            tuple(inputs),
            seed,
            mem_mb,
            gpus,
            vram_mb,
            timeout_s,
        )
    )


def _mark(spec: StageSpec) -> Callable:
    def decorate(method: Callable) -> Callable:
        setattr(method, _STAGE_ATTR, spec)
        return method

    return decorate


class StageCall:
    """What a stage method is called with: its params, artifact paths, scratch folder, seed.

    ``params`` holds only the params the stage declared; reading another one is an error that
    says how to declare it (an undeclared param would be missing from the cache signature).
    Put what the stage really used into ``effective`` (point-of-use capture): a value that
    differs from the declared one makes the trial non-comparable.
    """

    def __init__(
        self,
        stage: str,
        params: Mapping[str, Any],
        artifacts: Mapping[str, Path],
        out: Path,
        seed: int | None = None,
    ):
        self.stage = stage
        self.params = DeclaredParams(stage, params)
        self.artifacts = dict(artifacts)
        self.out = out
        self.seed = seed
        self.effective: dict[str, Any] = {}


class DeclaredParams(Mapping[str, Any]):
    """A read-only mapping of a stage's declared params whose misses explain the fix."""

    def __init__(self, stage: str, values: Mapping[str, Any]):
        self._stage = stage
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(
                f"stage '{self._stage}' reads param '{name}', which it does not "
                f"declare; add '{name}' to its decorator's params=[...] so the cache "
                "signature includes it"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class Domain:
    """Base class of Python Domains (see the module docstring and docs/benchmark/DOMAIN_API.md).

    Subclasses set ``manifest`` (param -> ``ManifestEntry`` or ``{default, why}``), ``metrics``
    (metric -> spec fields) and ``resources``, and define stage methods taking a
    :class:`StageCall` and returning a mapping of metrics (measure) or None (prep).
    """

    manifest: ClassVar[Mapping[str, ManifestEntry | Mapping[str, Any]]] = {}
    metrics: ClassVar[Mapping[str, MetricSpec | Mapping[str, Any]]] = {}
    resources: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def stage_methods(cls) -> dict[str, StageSpec]:
        """Stage method name -> its spec, in definition order (base classes first)."""
        found: dict[str, StageSpec] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                spec = getattr(member, _STAGE_ATTR, None)
                if isinstance(spec, StageSpec):
                    found[name] = spec
                elif name in found:
                    del found[name]  # overridden by a plain method
        return found

    @classmethod
    def manifest_entries(cls) -> dict[str, ManifestEntry]:
        return {
            name: entry
            if isinstance(entry, ManifestEntry)
            else ManifestEntry.model_validate(dict(entry))
            for name, entry in cls.manifest.items()
        }

    @classmethod
    def metric_specs(cls) -> dict[str, MetricSpec]:
        return {
            name: spec if isinstance(spec, MetricSpec) else MetricSpec.model_validate(dict(spec))
            for name, spec in cls.metrics.items()
        }

    @classmethod
    def validate(cls) -> None:
        """Raise DomainDefinitionError naming every inconsistency of the class."""
        where = f"{cls.__module__}.{cls.__qualname__}"
        stages = cls.stage_methods()
        problems: list[str] = []
        if not any(spec.kind == "measure" for spec in stages.values()):
            problems.append("defines no @measure method, so nothing would be measured")
        try:
            manifest, metrics = cls.manifest_entries(), cls.metric_specs()
            Resources.model_validate(dict(cls.resources))
        except ValueError as exc:
            raise DomainDefinitionError(
                f"{where}: manifest, metrics or resources are not valid: {exc}"
            ) from None
        producers: dict[str, str] = {}
        for name, spec in stages.items():
            for need in spec.needs:
                if need not in stages:
                    problems.append(f"{name}: needs unknown stage method '{need}'")
                elif stages[need].kind != "prep":
                    problems.append(f"{name}: needs '{need}', which is not a @prep")
            for artifact in spec.produces:
                if artifact in producers:
                    problems.append(
                        f"{name}: artifact '{artifact}' is also produced by '{producers[artifact]}'"
                    )
                producers[artifact] = name
            for param in spec.params:
                if param not in manifest:
                    problems.append(
                        f"{name}: param '{param}' is not in the manifest; add it "
                        "with its default and why it matters"
                    )
            for metric in spec.metrics:
                if metric not in metrics:
                    problems.append(
                        f"{name}: metric '{metric}' has no spec in metrics "
                        "(its better direction is unknown)"
                    )
            for text in (*spec.params, *spec.produces):
                if not _NAME.match(text):
                    problems.append(f"{name}: '{text}' is not a valid placeholder name")
            try:
                stage_source(cls, name)
            except (OSError, TypeError):
                problems.append(
                    f"{name}: its source cannot be read, so edits to it could not "
                    "invalidate its cache entries"
                )
        if problems:
            raise DomainDefinitionError(f"{where}: " + "; ".join(problems))

    @classmethod
    def compile(cls, config: BenchmarkConfig, path: Path) -> BenchmarkConfig:
        """The benchmark file ``config`` with this domain's stages, manifest, metrics and
        resources filled in (the file's own metric specs, resources and manifest win)."""
        if config.recipe:
            raise ConfigError(
                path,
                [
                    (
                        "recipe",
                        f"a recipe supplies command stages, and domain "
                        f"'{config.domain}' supplies its own.",
                        "drop recipe:, or use the recipe with domain: command.",
                    )
                ],
            )
        if config.stages:
            names = ", ".join(cls.stage_methods())
            raise ConfigError(
                path,
                [
                    (
                        "stages",
                        f"domain '{config.domain}' defines its own stages ({names}).",
                        "remove stages:, or write shell stages with domain: command.",
                    )
                ],
            )
        module_file = Path(inspect.getfile(cls)).resolve()
        stages = [
            _compile_stage(cls, name, spec, config, module_file)
            for name, spec in cls.stage_methods().items()
        ]
        update: dict[str, Any] = {
            "stages": stages,
            "manifest": {**cls.manifest_entries(), **config.manifest},
            "metrics": merge_metrics(cls.metric_specs(), config),
            "resources": merge_resources(Resources.model_validate(dict(cls.resources)), config),
            "code": config.code or [".", str(module_file)],
        }
        return config.model_copy(update=update)


def _compile_stage(
    cls: type[Domain], name: str, spec: StageSpec, config: BenchmarkConfig, module_file: Path
) -> Stage:
    stages = cls.stage_methods()
    upstream: list[str] = []
    pending = list(spec.needs)
    while pending:
        need = pending.pop()
        for artifact in stages[need].produces:
            if artifact not in upstream:
                upstream.append(artifact)
        pending += stages[need].needs
    words = [
        shlex.quote(sys.executable),
        "-m",
        RUNNER,
        shlex.quote(f"{cls.__module__}:{cls.__qualname__}"),
        name,
        "--file",
        shlex.quote(str(module_file)),
        "--out",
        "{out}",
    ]
    words += [f"--param {param}={{{param}}}" for param in spec.params]
    words += [
        f"--artifact {artifact}={{{artifact}}}" for artifact in (*sorted(upstream), *spec.produces)
    ]
    if spec.seed and config.seeds is not None:
        words += ["--seed", "{seed}"]
    source = stage_source(cls, name)
    return Stage(
        name=name,
        kind=spec.kind,
        cmd=" ".join(words),
        needs=list(spec.needs),
        produces=list(spec.produces),
        inputs=[str((module_file.parent / text).resolve()) for text in spec.inputs],
        env={SOURCE_ENV: hashlib.sha256(source.encode()).hexdigest()},
        metrics_from=MetricsFrom(stdout=True, fields=list(spec.metrics))
        if spec.kind == "measure"
        else None,
        mem_mb=spec.mem_mb,
        gpus=spec.gpus,
        vram_mb=spec.vram_mb,
        timeout_s=spec.timeout_s,
    )


_LITERALS = (bool, int, float, str, bytes, tuple, frozenset)


def stage_source(cls: type[Domain], method: str) -> str:
    """The source a stage's signature hashes: the method, and every function, class and
    literal constant of the domain's module or class it uses by name (on ``self``, the class
    or the module), followed transitively. Raises OSError when a source cannot be read."""
    module = sys.modules[cls.__module__]
    seen: set[str] = set()
    parts: list[str] = []

    def visit(label: str, member: Any) -> None:
        if label in seen:
            return
        seen.add(label)
        func = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if isinstance(func, _LITERALS):
            parts.append(f"{label} = {func!r}")
            return
        if not (
            (inspect.isfunction(func) or inspect.isclass(func))
            and func.__module__ == module.__name__
        ):
            return
        parts.append(inspect.getsource(func))
        for name in _names_used(getattr(func, "__code__", None)):
            if name in vars(module):
                visit(name, vars(module)[name])
            found = inspect.getattr_static(cls, name, None)
            if found is not None:
                visit(f"{cls.__qualname__}.{name}", found)

    visit(f"{cls.__qualname__}.{method}", inspect.getattr_static(cls, method))
    return "\n".join(parts)


def _names_used(code: Any) -> list[str]:
    """Global and attribute names a code object (and the code nested in it) refers to."""
    if code is None:
        return []
    names = list(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names += _names_used(const)
    return names


# -- registry --------------------------------------------------------------------------------

_REGISTRY: dict[str, type[Domain]] = {}


def register_domain(name: str, cls: type[Domain]) -> type[Domain]:
    """Make ``cls`` usable as ``domain: name`` in this process (e.g. from a ``conftest.py``)."""
    if name == "command":
        raise DomainDefinitionError("'command' is the shell-stage domain and cannot be replaced")
    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise DomainDefinitionError(
            f"register_domain('{name}', ...): {cls!r} is not a subclass "
            "of pytest_benchmark_agent.domains.api.Domain"
        )
    cls.validate()
    _REGISTRY[name] = cls
    return cls


def available_domains() -> list[str]:
    """Every domain name usable here: in-process registrations and installed entry points."""
    names = {"command", *_REGISTRY}
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def domain_class(name: str, path: Path) -> type[Domain]:
    """The class ``domain: name`` of the benchmark file at ``path`` stands for.

    Looked up in-process, then among entry points, then as ``module:Class`` or
    ``file.py:Class`` (relative to the benchmark file). Raises ConfigError when unknown.
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    try:
        if found:
            cls = found[0].load()
        elif ":" in name:
            target, _, qualname = name.rpartition(":")
            file = (path.parent / target).resolve() if target.endswith(".py") else None
            cls = load_class(Path(target).stem if file else target, qualname, file)
        else:
            close = difflib.get_close_matches(name, available_domains(), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                path,
                [
                    (
                        "domain",
                        f"'{name}' is not a known domain{hint}.",
                        f"use one of {', '.join(available_domains())}, register "
                        "it with register_domain() in a conftest.py, or name a "
                        "class as module:Class or file.py:Class.",
                    )
                ],
            )
    except (ImportError, AttributeError, OSError) as exc:
        raise ConfigError(
            path,
            [
                (
                    "domain",
                    f"'{name}' cannot be loaded ({exc}).",
                    "check the module or file and the class name.",
                )
            ],
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise ConfigError(
            path,
            [
                (
                    "domain",
                    f"'{name}' is {cls!r}, not a Domain subclass.",
                    "point it at a subclass of pytest_benchmark_agent.Domain.",
                )
            ],
        )
    try:
        cls.validate()
    except DomainDefinitionError as exc:
        raise ConfigError(
            path, [("domain", f"'{name}' is not a valid Domain: {exc}.", "fix the domain class.")]
        ) from None
    return cls


def load_class(module: str, qualname: str, file: Path | None = None) -> type:
    """Import ``module`` and return ``qualname`` from it.

    With ``file``, the module is imported by name only when that name resolves to that very
    file (an installed package, with its relative imports); otherwise it is loaded from the
    file itself (a domain written next to a benchmark, or in a ``conftest.py``).
    """
    if file is not None and not _resolves_to(module, file):
        loaded = sys.modules.get(module)
        if loaded is None or Path(getattr(loaded, "__file__", "") or "").resolve() != file:
            spec = importlib.util.spec_from_file_location(module, file)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {file}")
            loaded = importlib.util.module_from_spec(spec)
            sys.path.insert(0, str(file.parent))
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
    else:
        loaded = importlib.import_module(module)
    target: Any = loaded
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _resolves_to(module: str, file: Path) -> bool:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return bool(spec and spec.origin) and Path(spec.origin).resolve() == file.resolve()


def expand_domain(config: BenchmarkConfig, path: Path) -> BenchmarkConfig:
    """Compile ``domain:`` into stages (the identity for ``domain: command``)."""
    if config.domain == "command":
        return config
    return domain_class(config.domain, path).compile(config, path)


__all__ = [
    "Domain",
    "DomainDefinitionError",
    "StageCall",
    "StageSpec",
    "available_domains",
    "domain_class",
    "expand_domain",
    "load_class",
    "measure",
    "prep",
    "register_domain",
]
