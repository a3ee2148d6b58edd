"""``benchmark-agent domain NAME [--recipe R]``: scaffold a new benchmark in ``NAME/``.

With ``--recipe R`` it writes a CommandDomain file using the recipe (every manifest param
declared at its default, with why as a comment; the recipe's example treatment) and one script
per stage, each parsing exactly the flags its command passes and saying what it must do. Without
a recipe it writes a Python Domain skeleton (a small, working benchmark to replace), the
benchmark file naming it, and a test running it with the ``bench`` fixture. Either passes
``pytest --bench --collect-only NAME/bench.yaml`` as written (GPU recipes where NVML answers),
except that a manifest param without a default is written ``CHANGE-ME``: gate 1 names it until
a real value (the recipe's ``example`` shows one) replaces it.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.config.framing import Frame
from pytest_benchmark_agent.config.models import ManifestEntry
from pytest_benchmark_agent.config.recipe import (
    SCAFFOLD_PLACEHOLDER,
    Recipe,
    available_recipes,
    load_recipe,
    params_to_set,
)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


class _ScaffoldDumper(yaml.SafeDumper):
    """Writes a text that any YAML reader could take for a number (``'2e-5'``) quoted, so the
    file reads back as the recipe wrote it under YAML 1.1 (the loader) and 1.2 (editors)."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    try:
        float(text)
    except ValueError:
        return dumper.represent_str(text)
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="'")


_ScaffoldDumper.add_representer(str, _represent_text)


def _scalar(value: Any) -> str:
    """A value as YAML flow text (``20``, ``'2e-5'``, ``[1, 2, 3]``, ``'0.6'``)."""
    return (
        yaml.dump(value, Dumper=_ScaffoldDumper, default_flow_style=True, width=1000)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _param_lines(manifest: dict[str, ManifestEntry]) -> list[str]:
    """Every manifest param at its default (``CHANGE-ME`` where it has none), with why."""
    lines = ["params:"]
    for param, entry in manifest.items():
        if param == "seeds":
            continue
        value = entry.default if entry.default is not None else SCAFFOLD_PLACEHOLDER
        note = "required" if entry.default is not None else "required, no default"
        looks = f"; e.g. {entry.example}" if entry.example is not None else ""
        lines.append(f"  {param}: {_scalar(value)}    # {note}: {entry.why}{looks}")
    return lines


def recipe_files(
    name: str, recipe_name: str, recipe: Recipe, framed: Frame | None = None
) -> dict[str, str]:
    """File name -> content of a CommandDomain benchmark built on ``recipe`` (testing the
    ``framed`` hypothesis, else the recipe's example)."""
    example = recipe.example
    hypothesis = framed.hypothesis if framed else example.get("hypothesis", "State what you expect")
    lines = [
        f"# Written by `benchmark-agent {'plan' if framed else 'domain'} {name} --recipe "
        f"{recipe_name}`: make each stage script do what it says,",
        f"# set the params to what you use, then run: pytest --bench {name}/bench.yaml",
        f"recipe: {recipe_name}",
        f"name: {name}",
        f"hypothesis: {_scalar(hypothesis)}",
        *_param_lines(recipe.manifest),
        f"treatment_variable: {framed.variable if framed else example.get('treatment_variable')}",
        f"treatments: {_scalar(framed.treatments if framed else example.get('treatments', []))}",
    ]
    if "seeds" in recipe.manifest:
        entry = recipe.manifest["seeds"]
        lines.append(f"seeds: {_scalar(entry.default or [1, 2, 3])}    # {entry.why}")
    files = {"bench.yaml": "\n".join(lines) + "\n"}
    for stage in recipe.stages:
        words = shlex.split(stage.cmd or "")
        script = next((w for w in words if w.endswith(".py")), None)
        if script is None:
            continue
        flags = [
            (word, words[i + 1])
            for i, word in enumerate(words[:-1])
            if word.startswith("--") and words[i + 1].startswith("{")
        ]
        files[script] = _stage_script(
            recipe_name,
            stage.name,
            stage.kind,
            recipe.stage_notes.get(stage.name, ""),
            flags,
            stage.metrics_from.fields if stage.metrics_from else [],
        )
    return files


def _stage_script(
    recipe: str, stage: str, kind: str, note: str, flags: list[tuple[str, str]], metrics: list[str]
) -> str:
    arguments = "\n".join(
        f"    parser.add_argument({flag!r}, required=True, help={place!r})" for flag, place in flags
    )
    promise = (
        f"print {', '.join(f'{m}=<number>' for m in metrics)} on stdout"
        if metrics
        else "create every path it is given to produce"
    )
    return f'''"""Stage `{stage}` ({kind}) of the {recipe} recipe: {note}.

Written by `benchmark-agent domain`: replace the body of main(). A {kind} stage must {promise}.
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
{arguments}
    args = parser.parse_args()
    raise SystemExit(f"stage {stage} is not written yet: {{__file__}} must {promise} "
                     f"(got {{vars(args)}})")


if __name__ == "__main__":
    main()
'''


def typed_domain_file(
    name: str, domain: str, manifest: dict[str, ManifestEntry], framed: Frame
) -> str:
    """The benchmark file of a registered Python Domain testing the ``framed`` hypothesis."""
    lines = [
        f"# Written by `benchmark-agent plan {domain}`: set the params to what you use, then",
        f"# run: pytest --bench {name}/bench.yaml",
        f"domain: {domain}",
        f"name: {name}",
        f"hypothesis: {_scalar(framed.hypothesis)}",
        *_param_lines(manifest),
        f"treatment_variable: {framed.variable}",
        f"treatments: {_scalar(framed.treatments)}",
    ]
    if "seeds" in manifest:
        lines.append(f"seeds: {_scalar(manifest['seeds'].default or [1, 2, 3])}")
    return "\n".join(lines) + "\n"


def write_files(folder: Path, files: dict[str, str], verb: str) -> None:
    """Write the scaffold's files into ``folder``, refusing to overwrite any."""
    existing = [name for name in files if (folder / name).exists()]
    if existing:
        raise SystemExit(
            f"benchmark-agent {verb}: {folder} already holds {', '.join(existing)}; "
            "choose another name or remove them"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
        print(f"wrote {folder / name}")


def domain_files(name: str) -> dict[str, str]:
    """File name -> content of a Python Domain skeleton, its benchmark file and its test."""
    module = f"{name.replace('-', '_')}_domain"
    cls = "".join(part.capitalize() for part in re.split(r"[-_]", name)) + "Domain"
    return {
        f"{module}.py": _domain_module(name, cls),
        "bench.yaml": _domain_bench(name, module, cls),
        f"test_{name.replace('-', '_')}.py": _domain_test(name),
    }


def _domain_module(name: str, cls: str) -> str:
    """The skeleton Domain ``cls``: a seeded prep and a timed sort, to replace with yours."""
    return f'''"""The `{name}` benchmark as a Python Domain (by `benchmark-agent domain {name}`).

A small working example to replace with your own stages: a prep writes seeded random numbers
(cached by signature: the params it declares and this method's source), and the measure stage
times sorting them with the method under test. See docs/benchmark/DOMAIN_API.md.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import time

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure, prep

METHODS = ("sorted", "heapq")


class {cls}(Domain):
    """Sorting method against sort time, at identical results."""

    manifest = {{
        "data.size": {{"default": 100000, "why": "how many numbers are sorted"}},
        "data.seed": {{"default": 1, "why": "it fixes the numbers every treatment sorts"}},
        "sort.method": {{"default": "sorted", "why": "the sorting method under test"}},
    }}
    metrics = {{
        "sort_ms": {{"direction": "lower", "primary": True, "noise_threshold": 0.02}},
        "checksum": {{"direction": "equal", "guard": True}},
    }}
    resources = {{"mem_mb": 512}}

    @prep(produces=["numbers"], params=["data.size", "data.seed"])
    def generate(self, call: StageCall) -> None:
        rng = random.Random(call.params["data.seed"])
        values = (repr(rng.random()) for _ in range(call.params["data.size"]))
        call.artifacts["numbers"].write_text("\\n".join(values))

    @measure(needs=["generate"], params=["sort.method"], metrics=["sort_ms", "checksum"])
    def sort(self, call: StageCall) -> dict[str, float]:
        values = [float(line) for line in call.artifacts["numbers"].read_text().split()]
        method = call.params["sort.method"]
        if method not in METHODS:
            raise ValueError(f"sort.method={{method!r}}: use one of {{', '.join(METHODS)}}")
        start = time.perf_counter()
        ordered = sorted(values) if method == "sorted" else heapq.nsmallest(len(values), values)
        elapsed_ms = (time.perf_counter() - start) * 1000
        call.effective["sort.method"] = method
        digest = hashlib.sha256(repr(ordered).encode()).hexdigest()
        return {{"sort_ms": elapsed_ms, "checksum": int(digest[:13], 16)}}
'''


def _domain_bench(name: str, module: str, cls: str) -> str:
    """The benchmark file running the skeleton Domain: its two sorting methods compared."""
    return f"""# Written by `benchmark-agent domain {name}`.
# Run it with: pytest --bench {name}/bench.yaml
domain: {module}.py:{cls}
name: {name}
hypothesis: "sorted() sorts faster than heapq.nsmallest at identical results"
params:
  data.size: 100000
  data.seed: 1
  sort.method: sorted
treatment_variable: sort.method
treatments: [sorted, heapq]
replicates: 7
"""


def _domain_test(name: str) -> str:
    """A test running the skeleton's benchmark small with the ``bench`` fixture."""
    return f'''"""Runs the `{name}` benchmark on a small input with the `bench` fixture."""


def test_{name.replace("-", "_")}_runs_and_sorts_identically(bench):
    result = bench.run("bench.yaml", params={{"data.size": 2000}}, replicates=2)
    assert result.counts == {{"passed": 4}}, result.output
    checksums = result.samples("checksum")
    assert checksums["sorted"] == checksums["heapq"]
'''


def cmd_domain(args: argparse.Namespace) -> int:
    """Scaffold a benchmark: a CommandDomain file from a recipe, or a Python Domain skeleton
    with a test. What it writes passes `pytest --bench --collect-only` once each param the
    recipe gives no default (written CHANGE-ME) names the value you use."""
    if not _NAME.match(args.name):
        raise SystemExit(
            f"benchmark-agent domain: '{args.name}' is not a usable name; use "
            "letters, digits, '-' and '_', starting with a letter"
        )
    folder = Path(args.dir) / args.name
    if args.recipe:
        if args.recipe not in available_recipes():
            raise SystemExit(
                f"benchmark-agent domain: no recipe '{args.recipe}'; recipes: "
                f"{', '.join(available_recipes())}"
            )
        recipe = load_recipe(args.recipe, folder / "bench.yaml")
        files = recipe_files(args.name, args.recipe, recipe)
        to_set = params_to_set(recipe.manifest)
    else:
        files, to_set = domain_files(args.name), []
    write_files(folder, files, "domain")
    if to_set:
        print(
            f"next: in {folder / 'bench.yaml'} replace {SCAFFOLD_PLACEHOLDER} with the value you "
            f"use for {', '.join(to_set)} (each comment shows what one looks like), then:"
        )
    print(f"next: pytest --bench --collect-only {folder / 'bench.yaml'}   (plans, runs nothing)")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    summary = (cmd_domain.__doc__ or "").splitlines()[0]
    verb = verbs.add_parser("domain", help=summary, description=cmd_domain.__doc__)
    verb.add_argument("name", help="the benchmark's name (and its folder)")
    verb.add_argument("--recipe", help=f"start from a recipe: {', '.join(available_recipes())}")
    verb.add_argument(
        "--dir", default=".", help="where the folder NAME/ is created (default: the current folder)"
    )
    verb.set_defaults(func=cmd_domain)
