"""``report.md`` of a tune, from its record alone: the path of incumbents, the rounds, every
candidate and why it was or was not selected, ties within noise, the plot, What Went Wrong and
the controls. Reading only the record keeps the report reproducible from ``results.yaml``.
"""

from __future__ import annotations

from typing import Any

from pytest_benchmark_agent.engine.plan import point_label
from pytest_benchmark_agent.tune.selection import gist
from pytest_benchmark_agent.util.placeholders import as_text


def render_report(doc: dict[str, Any], plot_note: str | None) -> str:
    """``report.md`` of a tune, from its record alone."""
    lines = [
        *_summary(doc),
        *_path_section(doc),
        *_rounds_section(doc),
        *_candidates_section(doc),
        *_ties_section(doc),
        "",
        "## Objective over the search space",
        "",
        plot_note or "![objective over the search space](objective.png)",
        "",
        "## What Went Wrong",
        "",
        *(f"- {item}" for item in what_went_wrong(doc)),
        "",
        "## Controls",
        "",
        "| param | value | role |",
        "|---|---|---|",
    ]
    for name, value in doc["params"].items():
        role = "TUNED" if name in doc["search_space"] else "CONTROL"
        lines.append(f"| `{name}` | `{as_text(value)}` | {role} |")
    return "\n".join(lines) + "\n"


def _summary(doc: dict[str, Any]) -> list[str]:
    """The title and the tune at a glance: hypothesis, strategy, state, selection, cost."""
    objective = doc["objective"]["metric"]
    direction = doc["objective"]["direction"]
    return [
        f"# {doc['name']}: tune {doc['run_id']}",
        "",
        f"- **Hypothesis:** {doc.get('hypothesis') or '(none stated)'}",
        f"- **Strategy:** {doc['strategy']}; objective `{objective}` ({direction} is "
        "better); constraints: " + (", ".join(f"`{c}`" for c in doc["constraints"]) or "none"),
        f"- **State:** {doc['state']}"
        + (f": {doc['stop_reason']}" if doc.get("stop_reason") else ""),
        f"- **Selected:** {selected_text(doc, '`')} (start `{doc['control']}`)",
        f"- **Objective at the selected point:** {chain_text(doc)}",
        f"- **Spent:** {_spent_text(doc)}",
        "- **Record:** [results.yaml](results.yaml); each round's own run is linked below",
    ]


def _path_section(doc: dict[str, Any]) -> list[str]:
    """Each incumbent with the confirmation round's ratio, CI and p."""
    lines = [
        "",
        "## Path of incumbents",
        "",
        "Each move was selected in one round and confirmed against the same incumbent in a "
        "fresh round; the ratio, CI and p are the confirmation's (the selection round's ratio, "
        "biased towards the luckiest candidate, is beside them).",
        "",
        f"| step | round | confirmed in | point | ratio to previous "
        f"({doc['objective']['metric']}) | 95% CI | p (Holm) | ratio when selected |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for step, entry in enumerate(doc["incumbents"]):
        if entry["round"] is None:
            lines.append(f"| 0 | - | - | `{entry['label']}` (start) | | | | |")
            continue
        lines.append(
            f"| {step} | {entry['round']} | {entry.get('confirmed_in', '')} | "
            f"`{entry['label']}` | {_num(entry['ratio'])} | {_ci(entry.get('ci'))} | "
            f"{_num(entry.get('p_holm'))} | {_num(entry.get('selection_ratio'))} |"
        )
    return lines


def _rounds_section(doc: dict[str, Any]) -> list[str]:
    """Each round's runs, incumbent, size and outcome, and why rounds have their blocks."""
    lines = [
        "",
        "## Rounds",
        "",
        "| round | runs | incumbent | points | blocks | trials | outcome |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["rounds"]:
        runs = ", ".join(
            f"[{run}](../{run}/report.md)" for run in r.get("run_ids") or [r["run_id"]]
        )
        lines.append(
            f"| {r['round']} | {runs} | `{r['incumbent']}` | {len(r['points'])} | "
            f"{r.get('blocks', '')} | {r['trials']} | {r.get('outcome', '')} |"
        )
    if not doc["rounds"]:
        lines.append("| (none ran) | | | | | | |")
    sized = [r for r in doc["rounds"] if len(r.get("run_ids") or []) > 1]
    if sized:
        lines += [
            "",
            "Blocks per round: the fewest at which its comparisons can be decided at all. "
            f"Round {sized[0]['round']}: {sized[0]['blocks_why']}.",
        ]
    return lines


def _candidates_section(doc: dict[str, Any]) -> list[str]:
    """Every candidate against its round's incumbent, with the decision and why."""
    lines = [
        "",
        "## Candidates",
        "",
        f"Each point against the incumbent of its round (median `{doc['objective']['metric']}`, "
        "the ratio and CI of gate 2's paired comparison).",
        "",
        "| round | point | incumbent | median | ratio | 95% CI | verdict | decision | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in doc["candidates"]:
        v = c.get("verdict") or {}
        lines.append(
            f"| {c['round']} | `{c['label']}` | `{c['incumbent']}` | "
            f"{_num(c.get('median'))} | {_num(v.get('ratio'))} | {_ci(v.get('ci'))} | "
            f"{v.get('verdict', '')} | {c['decision']} | {_cell(c['reason'])} |"
        )
    return lines


def _ties_section(doc: dict[str, Any]) -> list[str]:
    """Ties within noise and candidates not shown to differ (the incumbent kept)."""
    ties = list(doc["ties"]) + [
        f"round {c['round']}: `{c['label']}` was not shown to differ from the incumbent "
        f"`{c['incumbent']}`; the incumbent (the earlier point) was kept."
        for c in doc["candidates"]
        if c["decision"] == "no_change"
    ]
    return ["", "## Ties and candidates not shown to differ", ""] + (
        [f"- {t}" for t in ties] or ["- none: every comparison was decided."]
    )


def what_went_wrong(doc: dict[str, Any]) -> list[str]:
    """Halts, failures, refusals and constraint failures; never empty."""
    items = []
    if doc.get("halt"):
        items.append(f"**Halted ({doc['halt']['kind']}):** {doc['halt']['message']}")
    if doc.get("failure"):
        items.append(f"**Failed:** {gist(doc['failure'])}")
    if doc["state"] == "interrupted":
        items.append(
            "**Interrupted:** the tune was stopped; resume it with "
            f"`benchmark-agent tune {doc['config_file']} --resume {doc['run_id']}`."
        )
    for c in doc["candidates"]:
        if c["decision"] == "not_comparable":
            items.append(
                f"**Refused (not comparable):** round {c['round']} `{c['label']}`: {c['reason']}"
            )
        elif c["decision"] == "constraint_failed":
            items.append(f"**Constraint failed:** round {c['round']} `{c['label']}`: {c['reason']}")
        elif c["decision"] == "unconfirmed":
            items.append(f"**Not confirmed:** round {c['round']} `{c['label']}`: {c['reason']}")
        elif c["decision"] == "no_change" and c.get("observed_better"):
            ratio = (c.get("verdict") or {}).get("ratio")
            items.append(
                f"**Refused (gain not supported):** round {c['round']} `{c['label']}` "
                f"looked better (ratio {_num(ratio)}) but {c['reason']}"
            )
    if not items:
        items.append(
            "Nothing halted, was refused or broke a constraint. Not tested: values "
            "between the lattice points, params outside the search space, and other "
            "machines or loads than this one."
        )
    return items


def selected_text(doc: dict[str, Any], code: str = "") -> str:
    if doc.get("selected") is None:
        return "nothing (no round finished, so no point is grounded)"
    return f"{code}{point_label(doc['selected'])}{code}"


def chain_text(doc: dict[str, Any]) -> str:
    ratio = doc.get("chained_ratio")
    if ratio is None:
        return "the start was kept (no supported move)."
    moves = len(doc["incumbents"]) - 1
    better = 1 / ratio if doc["objective"]["direction"] == "lower" else ratio
    return (
        f"{ratio:.4g}x the start's, i.e. {better:.3g}x better (chained over {moves} "
        f"confirmed move(s), each measured within its confirmation round's blocks)."
    )


def _spent_text(doc: dict[str, Any]) -> str:
    spent, budget = doc["spent"], doc.get("budget") or {}
    parts = [
        f"{spent['trials']} trials" + (f" of {budget['trials']}" if "trials" in budget else ""),
        f"{spent['wall_s']:.1f}s"
        + (f" of {budget['wall_clock_s']:g}s" if "wall_clock_s" in budget else ""),
    ]
    if spent["gpu_hours"] or "gpu_hours" in budget:
        parts.append(f"{spent['gpu_hours']:.4g} GPU-hours")
    if spent["cost_usd"] or "cost_usd" in budget:
        parts.append(f"${spent['cost_usd']:.2f}")
    return f"{', '.join(parts)} in {len(doc['rounds'])} round(s)"


def _num(value: Any) -> str:
    return "" if value is None else f"{value:.4g}"


def _ci(ci: Any) -> str:
    return "" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
