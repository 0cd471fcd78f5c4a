"""profile.png: every headline metric of a profile between its family's floor (the prior) and ceiling (the oracle).

One panel per family that was scored; in each, one column per headline metric. The y axis is the
position in the metric's declared range (0 its low end, 1 its high end; a count metric, which has
no upper bound, is shown as a share of the largest of the three values). A grey bar spans prior to
oracle, a triangle marks each end, and the model's value is a dot labelled with its raw value;
an undefined value is written "n/a" in place of the dot. Where the suite asked the family's
no-image pass, a grey cross marks the model's value without the images (what it scores blind).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mmfaith import families
from mmfaith.evaluators.plots import NA, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _position(value: float | None, span: tuple[float, float]) -> float | None:
    if value is None:
        return None
    low, high = span
    return (value - low) / (high - low) if high > low else 0.0


def _span(metric: families.MetricInfo | None, row: Mapping[str, Any], entry: Mapping[str, Any]) -> tuple[float, float]:
    if metric is not None and metric.range is not None:
        return metric.range
    seen = [v for v in (row["value"], entry["prior"].get(row["key"]), entry["oracle"].get(row["key"])) if v is not None]
    return 0.0, max([1.0, *seen])


def profile_figure(profile: Mapping[str, Any]) -> Figure:
    """The profile's figure (module docstring)."""
    scored = [(name, entry) for name, entry in profile["families"].items() if entry["status"] == "ok"]
    width = max(6.0, 0.9 * max([len(entry["headline"]) for _, entry in scored] or [1]) + 2.0)
    figure = new_figure(width, 2.6 * max(1, len(scored)) + 0.6)
    figure.suptitle(f"{profile['model']}: each metric between the prior (floor) and the oracle (ceiling)")
    if not scored:
        figure.text(0.5, 0.5, "no family was scored (profile.md says why)", ha="center")
        return figure
    for k, (name, entry) in enumerate(scored):
        family = families.get(name)
        axes = figure.add_subplot(len(scored), 1, k + 1)
        labels = []
        for x, row in enumerate(entry["headline"]):
            metric = family.metric(row["key"]) or family.metric(row["key"].rpartition(".")[2])
            span = _span(metric, row, entry)
            floor, ceiling = (_position(entry[end].get(row["key"]), span) for end in ("prior", "oracle"))
            if floor is not None and ceiling is not None:
                axes.plot([x, x], [floor, ceiling], color="#BBBBBB", linewidth=6, solid_capstyle="butt", zorder=1)
            if floor is not None:
                axes.scatter([x], [floor], marker="v", color="#C44E52", zorder=2, label="prior" if x == 0 else None)
            if ceiling is not None:
                axes.scatter([x], [ceiling], marker="^", color="#55A868", zorder=2, label="oracle" if x == 0 else None)
            blind = _position((entry.get("no_image") or {}).get("values", {}).get(row["key"]), span)
            if blind is not None:
                axes.scatter([x], [blind], marker="x", color="#555555", zorder=2,
                             label="model, no image" if not labels else None)
            shown = _position(row["value"], span)
            if shown is None:
                axes.text(x, 0.5, NA, ha="center", va="center", fontsize="small", color="dimgray")
            else:
                axes.scatter([x], [shown], color="#4C72B0", s=40, zorder=3, label="model" if x == 0 else None)
                axes.annotate(f"{row['value']:.2f}", (x, shown), xytext=(6, 0), textcoords="offset points",
                              fontsize="x-small", va="center")
            labels.append(row["key"])
        axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="x-small")
        axes.set_ylim(-0.08, 1.08)
        axes.set_xlim(-0.6, len(labels) - 0.4)
        axes.set_ylabel("position in range", fontsize="x-small")
        axes.set_title(family.title, fontsize="small")
        if k == 0:
            axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="x-small", frameon=False)
    return figure
