"""Strategies: which points the tuner proposes next, given the incumbent and what moved.

``grid`` evaluates every lattice point in one round; ``refine`` a coarse grid, then the
incumbent's neighbours on grids of half the spacing (searched again while the incumbent
moves), until the spacing reaches the lattice or no neighbour is distinguishable from the
incumbent (the noise allows no finer resolution); ``coordinate`` searches one param's line at a
time, cycling until every line has been searched at the current incumbent without a supported
move. A strategy only proposes points (:meth:`Search.evaluate`); the tuner runs and judges
them, so every strategy moves by the same rules. Each returns why it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import product
from typing import Protocol

from pytest_benchmark_agent.engine.plan import point_label
from pytest_benchmark_agent.tune.selection import Candidate
from pytest_benchmark_agent.tune.space import Point, SearchSpace


class Search(Protocol):
    """What a strategy sees of the tuner: the space, the incumbent, and a round to ask for."""

    space: SearchSpace
    incumbent: Point

    def evaluate(self, points: Iterable[Point]) -> list[Candidate]: ...


def grid(search: Search) -> str:
    """Every lattice point, in one round against the start."""
    search.evaluate(search.space.grid())
    return "every point of the grid was compared with the start"


def refine(search: Search) -> str:
    """A coarse grid, then grids of half the spacing around the incumbent.

    At each spacing the neighbourhood (each ordered param one spacing down or up) is
    searched again as long as the incumbent moves, so the search can walk past the coarse
    grid's cells; the spacing halves when it does not. It stops at the lattice, or when no
    neighbour is distinguishable from the incumbent: then the objective changes less over
    one spacing than these replicates can resolve, and a finer spacing would change it less.
    """
    space = search.space
    coarse = product(
        *(d.coarse_indices() if d.ordered else range(len(d.values)) for d in space.dimensions)
    )
    search.evaluate(space.point_at(ix) for ix in coarse)
    spacing = [d.coarse_spacing() if d.ordered else 0 for d in space.dimensions]
    while True:
        spacing = [s // 2 for s in spacing]
        if not any(spacing):
            return "the spacing reached the lattice of the search space"
        moved = True
        while moved:
            before = point_label(search.incumbent)
            judged = search.evaluate(_neighbourhood(space, search.incumbent, spacing))
            moved = point_label(search.incumbent) != before
            if (
                judged
                and all(c.decision in ("no_change", "not_comparable") for c in judged)
                and any(c.decision == "no_change" for c in judged)
            ):
                return (
                    f"no neighbour at spacing {max(spacing)} was distinguishable from the "
                    "incumbent: the noise allows no finer resolution"
                )


def _neighbourhood(space: SearchSpace, point: Point, spacing: list[int]) -> list[Point]:
    """The points of the finer grid next to ``point``: one ``spacing`` down and up along each
    ordered param, the others held (2 per param, so the rounds stay small as params grow)."""
    centre = space.indices(point)
    out = []
    for axis, (index, step) in enumerate(zip(centre, spacing, strict=True)):
        for moved in (index - step, index + step) if step else ():
            if 0 <= moved < len(space.dimensions[axis].values):
                out.append(space.point_at((*centre[:axis], moved, *centre[axis + 1 :])))
    return out


def coordinate(search: Search) -> str:
    """One param's line at a time, cycling until no line offers a supported move."""
    searched: dict[str, str] = {}
    while True:
        searched_any = False
        for dim in search.space.dimensions:
            others = point_label({k: v for k, v in search.incumbent.items() if k != dim.name})
            if searched.get(dim.name) == others:
                continue
            search.evaluate({**search.incumbent, dim.name: value} for value in dim.values)
            searched[dim.name] = point_label(
                {k: v for k, v in search.incumbent.items() if k != dim.name}
            )
            searched_any = True
        if not searched_any:
            return "every param's line was searched at the final incumbent without a move"


#: The strategies by name (``cli/tune.py`` names the same ones without importing this).
STRATEGIES: dict[str, Callable[[Search], str]] = {
    "grid": grid,
    "refine": refine,
    "coordinate": coordinate,
}
