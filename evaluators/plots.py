"""Bar charts for every family's reports, drawn so that they read correctly without a table beside them.

The rules every chart follows:
- each bar carries its value as a label ("0.00" for a zero: a zero-height bar stays visible);
- an undefined value (None) draws no bar but an "n/a" mark, and the reason, when given, goes into
  a footnote under the axes ("n/a: blind DRF (no described differences)");
- the value axis comes from the metrics' declarations (`mmfaith.families.MetricInfo`): a `rate`
  is fixed to [0, 1], a `signed` metric to its declared range (consistency ratio [-1, 1]), a
  `count` starts at 0 with integer ticks; a chart whose metrics need different axes gets one panel
  per axis;
- both axes are labelled, the legend sits right of the axes (never on the data), and the caller
  names the model in the title of a per-model chart.

Functions return the matplotlib `Figure` (on the Agg canvas, no pyplot and no global backend
state) so that callers and tests can inspect what was drawn (`figure_texts`) before `save_png`
writes it. PNGs carry no Software metadata, so their bytes depend only on the numbers.
"""
from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mmfaith.errors import MmfaithError
from mmfaith.jsonl import write_atomic

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from mmfaith.families import MetricInfo

NA = "n/a"
"""The mark drawn where a value is undefined."""
PANEL_HEIGHT = 4.2
_HEADROOM = 0.16  # share of the axis span left above (and below, for signed axes) for value labels
_Interval = Sequence[float] | None


@dataclass(frozen=True)
class ValueAxis:
    """The value axis of one panel.

    `low`/`high` bound the ticks and the axis line; `high` None means "from the data" (counts).
    `integer` asks for whole-number ticks and labels; `decimals` is the precision of the bar labels.
    """

    label: str
    low: float
    high: float | None
    integer: bool = False
    decimals: int = 2

    @classmethod
    def for_metrics(cls, metrics: Sequence[MetricInfo], label: str | None = None) -> ValueAxis:
        """The axis that fits every metric given (they must share a kind; see `panels_for`).

        rate: [0, 1]; signed: the union of the declared ranges; count: from 0, integer ticks.
        """
        kinds = {metric.kind for metric in metrics}
        if len(kinds) != 1:
            raise ValueError(f"one axis needs metrics of one kind, not {sorted(kinds)}")
        kind = kinds.pop()
        if kind == "count":
            return cls(label or "count", 0.0, None, integer=True, decimals=0)
        if kind == "rate":
            return cls(label or "rate (0 to 1)", 0.0, 1.0)
        if kind == "signed":
            ranges = [metric.range for metric in metrics if metric.range is not None]
            low, high = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else (-1.0, 1.0)
            return cls(label or f"score ({low:g} to {high:g})", low, high)
        raise ValueError(f"unknown metric kind {kind!r} (rate, signed or count)")

    def format(self, value: float) -> str:
        """A bar's label."""
        return str(int(round(value))) if self.integer else f"{value:.{self.decimals}f}"


def short_name(metric: MetricInfo) -> str:
    """A metric's name without its parenthesised expansion ("DS (difference sensitivity)" -> "DS")."""
    return metric.name.split(" (", 1)[0]


def tick_label(metric: MetricInfo) -> str:
    """A metric's category label on a chart: its short name, and the direction when lower is better."""
    return short_name(metric) + ("\n(lower is better)" if metric.better == "lower" else "")


def series_label(metric: MetricInfo) -> str:
    """A metric's name as a legend entry: its full name, and the direction when lower is better."""
    return metric.name + (" (lower is better)" if metric.better == "lower" else "")


def panels_for(metrics: Sequence[MetricInfo]) -> list[tuple[ValueAxis, list[MetricInfo]]]:
    """Metrics grouped by the axis they need (kind and range), in order of first appearance."""
    groups: dict[tuple[str, tuple[float, float] | None], list[MetricInfo]] = {}
    for metric in metrics:
        groups.setdefault((metric.kind, metric.range if metric.kind == "signed" else None), []).append(metric)
    return [(ValueAxis.for_metrics(members), members) for members in groups.values()]


def new_figure(width: float, height: float = PANEL_HEIGHT) -> Figure:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MmfaithError("the report's plots need matplotlib: pip install matplotlib "
                           "(metrics.json and items.jsonl are already written).") from exc
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)  # its own Agg canvas: drawable and inspectable without pyplot
    return figure


def _limits(axis: ValueAxis, values: Sequence[float], intervals: Sequence[_Interval]) -> tuple[float, float, list[float]]:
    """(bottom, top, ticks) of a panel: the axis range plus headroom for labels, and the ticks within the range.

    A count axis (`high` None) ends at the first whole tick at or above the largest value (1 at least).
    """
    from matplotlib.ticker import MaxNLocator

    high = axis.high
    if high is None:
        largest = float(max([1.0, *values, *(b[1] for b in intervals if b is not None)]))
        ticks = [float(t) for t in MaxNLocator(nbins=6, integer=axis.integer).tick_values(axis.low, largest)]
        high = next(t for t in ticks if t >= largest)
    else:
        ticks = [float(t) for t in MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]).tick_values(axis.low, high)]
    span = high - axis.low
    bottom = axis.low - (_HEADROOM * span if axis.low < 0 else 0.0)
    return bottom, high + _HEADROOM * span, [t for t in ticks if axis.low - 1e-9 <= t <= high + 1e-9]


def _draw(axes: Axes, categories: Sequence[str], series: Mapping[str, Sequence[float | None]],
          intervals: Mapping[str, Sequence[_Interval]], axis: ValueAxis, colors: Mapping[str, str]) -> bool:
    """Grouped bars with value labels and n/a marks on one panel; True when any value was undefined."""
    n = max(1, len(series))
    width = 0.8 / n
    known = [v for values in series.values() for v in values if v is not None]
    known_bounds = [b for label in series for b in intervals.get(label, ()) if b is not None]
    bottom, top, ticks = _limits(axis, known, known_bounds)
    high = ticks[-1]
    base = 0.0 if axis.low <= 0.0 <= high else axis.low
    label_size = "small"
    any_missing = False
    for k, (label, values) in enumerate(series.items()):
        xs = [i + (k - (n - 1) / 2) * width for i in range(len(categories))]
        bounds = list(intervals.get(label, [None] * len(values)))
        for x, value, bound in zip(xs, values, bounds):
            if value is None:
                any_missing = True
                axes.text(x, base + 0.02 * (top - bottom), NA, ha="center", va="bottom", rotation=90,
                          fontsize=label_size, color="dimgray", style="italic")
                continue
            axes.bar(x, value - base, width, bottom=base, color=colors[label])
            if value == base:  # a zero-height bar: a stroke in the series' colour keeps it visible
                axes.hlines(base, x - width / 2, x + width / 2, colors=colors[label], linewidth=3)
            if bound is not None:
                axes.errorbar(x, value, yerr=[[max(0.0, value - bound[0])], [max(0.0, bound[1] - value)]],
                              fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
            end = max(value, bound[1]) if value >= base and bound is not None else value
            if value < base:
                end = min(value, bound[0]) if bound is not None else value
            axes.text(x, end + (0.02 if value >= base else -0.02) * (top - bottom), axis.format(value),
                      ha="center", va="bottom" if value >= base else "top",
                      rotation=90 if n > 2 else 0, fontsize=label_size)
    axes.set_xticks(range(len(categories)), [c if "\n" in c else textwrap.fill(c, 14) for c in categories],
                    fontsize="small")
    axes.set_xlim(-0.5, len(categories) - 0.5)
    axes.set_ylim(bottom, top)
    axes.spines["left"].set_bounds(axis.low, high)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    axes.set_yticks(ticks, [axis.format(t) if axis.integer else f"{t:.1f}" for t in ticks])
    axes.set_ylim(bottom, top)
    if axis.low < 0.0 < high:
        axes.axhline(0.0, color="black", linewidth=0.6)
    axes.set_ylabel(axis.label)
    return any_missing


def _finish(figure: Figure, title: str, labels: Sequence[str], colors: Mapping[str, str], legend_title: str,
            notes: Sequence[str]) -> Figure:
    from matplotlib.patches import Patch

    figure.suptitle(title)
    if len(labels) > 1:
        figure.legend([Patch(color=colors[label]) for label in labels], labels, loc="outside right center",
                      fontsize="small", title=legend_title, title_fontsize="small", frameon=False)
    if notes:  # as the figure's x label, so that the layout keeps room for it under everything else
        figure.supxlabel("\n".join(notes), x=0.01, ha="left", fontsize="small", color="dimgray")
    return figure


def _colors(labels: Sequence[str]) -> dict[str, str]:
    palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
    return {label: palette[k % len(palette)] for k, label in enumerate(labels)}


def _na_notes(missing: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Footnote lines for the undefined values, one per (category, reason) listing the series
    ("n/a: DRF for blind, garbled (no described differences)") or one per (series, reason) listing
    the categories ("n/a: yes-ratio in easy, hard (no parsed answers)"), whichever is shorter.

    `missing[series][category]` is the reason (may be empty) a value is undefined.
    """
    by_category: dict[tuple[str, str], list[str]] = {}
    by_series: dict[tuple[str, str], list[str]] = {}
    for label, reasons in missing.items():
        for category, reason in reasons.items():
            by_category.setdefault((category.replace("\n", " "), reason), []).append(label)
            by_series.setdefault((label, reason), []).append(category.replace("\n", " "))
    grouped, joint = (by_category, "for") if len(by_category) <= len(by_series) else (by_series, "in")
    return [f"{NA}: {head} {joint} {', '.join(members)}" + (f" ({reason})" if reason else "")
            for (head, reason), members in grouped.items()]


def bar_chart(title: str, categories: Sequence[str], series: Mapping[str, Sequence[float | None]], axis: ValueAxis,
              *, xlabel: str, intervals: Mapping[str, Sequence[_Interval]] | None = None,
              reasons: Mapping[str, Mapping[str, str]] | None = None, legend_title: str = "") -> Figure:
    """One panel of grouped bars: a bar per series (legend entries) in each category (x ticks).

    `series[label][i]` is the value in `categories[i]` (None: undefined, drawn as "n/a");
    `intervals[label][i]` its (low, high) error bar or None; `reasons[label][category]` why a value
    is undefined (footnote). Returns the Figure; `save_png` writes it.
    """
    colors = _colors(list(series))
    figure = new_figure(max(6.0, 0.9 * len(categories) * max(1, len(series)) ** 0.5 + 2.0))
    axes = figure.add_subplot()
    _draw(axes, categories, series, intervals or {}, axis, colors)
    axes.set_xlabel(xlabel)
    notes = _na_notes({label: {categories[i]: (reasons or {}).get(label, {}).get(categories[i], "")
                               for i, v in enumerate(values) if v is None} for label, values in series.items()})
    return _finish(figure, title, list(series), colors, legend_title, notes)


def metric_chart(title: str, metrics: Sequence[MetricInfo], values: Mapping[str, Mapping[str, float | None]],
                 *, intervals: Mapping[str, Mapping[str, _Interval]] | None = None,
                 reasons: Mapping[str, Mapping[str, str]] | None = None, legend_title: str = "model") -> Figure:
    """Metrics side by side for one or more series (models, or difficulty groups), one panel per axis.

    `values[label][metric.key]` (None: undefined); `intervals[label][metric.key]` an error bar or
    None; `reasons[label][metric.key]` why a value is undefined. The axes come from each metric's
    kind and range (module docstring). Returns the Figure.
    """
    labels = list(values)
    colors = _colors(labels)
    panels = panels_for(metrics)
    widths = [max(1.6, 0.75 * len(members) * max(1, len(labels)) ** 0.5) for _, members in panels]
    figure = new_figure(max(6.0, sum(widths) + 1.2 * len(panels)))
    grid = figure.add_gridspec(1, len(panels), width_ratios=widths)
    for column, (axis, members) in enumerate(panels):
        axes = figure.add_subplot(grid[0, column])
        _draw(axes, [tick_label(m) for m in members],
              {label: [values[label].get(m.key) for m in members] for label in labels},
              {label: [(intervals or {}).get(label, {}).get(m.key) for m in members] for label in labels},
              axis, colors)
        axes.set_xlabel("metric")
    notes = _na_notes({label: {short_name(m): (reasons or {}).get(label, {}).get(m.key, "")
                               for m in metrics if values[label].get(m.key) is None} for label in labels})
    return _finish(figure, title, labels, colors, legend_title, notes)


def save_png(figure: Figure, path: Path) -> Path:
    """Write the figure as a PNG (atomically, no Software metadata); returns the path."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    write_atomic(path, buffer.getvalue())
    return path


def figure_texts(figure: Figure) -> list[str]:
    """Every text drawn on a figure (titles, tick and axis labels, bar labels, n/a marks, legend, notes)."""
    from matplotlib.text import Text

    figure.canvas.draw()
    return [artist.get_text() for artist in figure.findobj(Text) if artist.get_text()]



def line_chart(title: str, x_label: str, x_values: Sequence[float], series: Mapping[str, Sequence[float | None]],
               y_label: str, y_range: tuple[float, float] | None = (0.0, 1.0)) -> Figure:
    """One panel of lines, one per series over the same x values (a threshold sweep, a masked share);
    a None value leaves a gap. `y_range` fixes the axis (rates: [0, 1]); None lets it follow the data."""
    figure = new_figure(7.0, PANEL_HEIGHT)
    axes = figure.add_subplot()
    colors = _colors(list(series))
    for label, values in series.items():
        ys = [float("nan") if v is None else v for v in values]
        axes.plot(list(x_values), ys, marker="o", label=label, color=colors[label])
    axes.set_title(title)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    if y_range is not None:
        axes.set_ylim(y_range[0] - 0.02, y_range[1] + 0.02)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    return figure
