"""Metric curves: an attempt's loss and gradient-norm series over the reference's, drawn in
braille with the verifier's tolerance band, and a table of the largest deviations."""

from __future__ import annotations

import math
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Static

from domain.text import clean
from screens.data import read
from screens.messages import CurvesLoaded, LoadFailed
from screens.presenters.curves import Curves, Series, deviations, fmt
from screens.presenters.palette import tone
from screens.text import text
from workbench import config

BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Braille dot bits by (row, column) inside a cell of 2x4 dots."""
AXIS = 9
"""Columns taken by the y-axis labels."""


def load_curves(db, attempts: list[tuple[str, int]], reference_id: int | None,
                migration_id: int, reviewer: str) -> Curves:
    """Runs in a worker: the compared metrics' series for `attempts` ((label, id)) and the
    reference, with the migration's tolerances unless `reviewer` is blind to one of the attempts
    (domain.blind.Sight: the curves stay, the tolerance goes)."""
    from storage import queries, review
    from workbench.blind import sight
    from workbench.verify.settings import merge, tolerance

    settings = merge(queries.verify_settings(db, migration_id))
    names = [str(n) for n in settings.get("compare") or []]
    present = review.metric_names(db, [a for _, a in attempts])
    names = [n for n in names if n in present]
    names += sorted(present - set(names) - {"step_time"})
    ids = [a for _, a in attempts]
    curves = Curves(metrics=names, blind=not sight(db, reviewer, attempts=ids).sees_attempts(ids))
    for name in names:
        rows = []
        for n, (label, attempt_id) in enumerate(attempts):
            rows.append(Series(label, {p.step: p.value for p in queries.metric_series(db, attempt_id, name)},
                               "attempt" if n == 0 else "other"))
        if reference_id is not None:
            rows.append(Series("reference", {p.step: p.value for p in
                                             queries.metric_series(db, reference_id, name)}, "reference"))
        curves.series[name] = rows
        if not curves.blind:
            curves.tolerance[name] = tolerance(settings, name)
    return curves


class CurvePlot(Widget):
    """One metric's series in braille; the band shades reference ± tolerance."""

    COMPONENT_CLASSES = {"curve-plot--attempt", "curve-plot--other", "curve-plot--reference",
                         "curve-plot--band", "curve-plot--axis", "curve-plot--marker"}
    DEFAULT_CSS = """
    CurvePlot { height: 1fr; min-height: 6; }
    CurvePlot > .curve-plot--attempt { color: $warning; text-style: bold; }
    CurvePlot > .curve-plot--other { color: $accent; text-style: bold; }
    CurvePlot > .curve-plot--reference { color: $primary; }
    CurvePlot > .curve-plot--band { color: $success 60%; }
    CurvePlot > .curve-plot--axis { color: $text-muted; }
    CurvePlot > .curve-plot--marker { color: $error; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: list[Series] = []
        self.tolerance: tuple[float, float] | None = None
        self.marker: int | None = None

    def show(self, series: list[Series], tolerance: tuple[float, float] | None,
             marker: int | None = None) -> None:
        self.series, self.tolerance, self.marker = series, tolerance, marker
        self.refresh()

    def render(self) -> Text:
        width = max(self.size.width - AXIS, 4)
        height = max(self.size.height - 1, 2)
        points = [(s, x, y) for s in self.series for x, y in s.points.items() if math.isfinite(y)]
        if not points:
            return Text("No series to plot for this metric.", style="dim")
        xs = [x for _, x, _ in points]
        ys = [y for _, _, y in points]
        reference = next((s for s in self.series if s.role == "reference"), None)
        band: list[tuple[int, float, float]] = []
        if reference is not None and self.tolerance is not None:
            rtol, atol = self.tolerance
            for x, r in sorted(reference.points.items()):
                if math.isfinite(r):
                    half = atol + rtol * abs(r)
                    band.append((x, r - half, r + half))
                    ys += [r - half, r + half]
        x0, x1 = min(xs), max(xs)
        y0, y1 = min(ys), max(ys)
        if y1 == y0:
            y0, y1 = y0 - 0.5, y1 + 0.5
        if x1 == x0:
            x1 = x0 + 1
        px_w, px_h = width * 2, height * 4

        def px(x: float) -> int:
            return min(px_w - 1, max(0, round((x - x0) / (x1 - x0) * (px_w - 1))))

        def py(y: float) -> int:
            return min(px_h - 1, max(0, round((y1 - y) / (y1 - y0) * (px_h - 1))))

        bits = [[0] * width for _ in range(height)]
        owner: list[list[str | None]] = [[None] * width for _ in range(height)]
        rank = {"band": 0, "reference": 1, "other": 2, "attempt": 3, "marker": 4}

        def dot(x: int, y: int, role: str) -> None:
            row, col = y // 4, x // 2
            bits[row][col] |= BITS[y % 4][x % 2]
            if owner[row][col] is None or rank[role] >= rank[owner[row][col]]:
                owner[row][col] = role

        # The band: every other dot between its edges, so the curves stay readable over it.
        for (xa, lo_a, hi_a), (xb, lo_b, hi_b) in zip(band, band[1:] or band):
            for x in range(px(xa), px(xb) + 1):
                t = 0.0 if px(xb) == px(xa) else (x - px(xa)) / (px(xb) - px(xa))
                top = py(hi_a + (hi_b - hi_a) * t)
                bottom = py(lo_a + (lo_b - lo_a) * t)
                for y in range(top, bottom + 1):
                    if (x + y) % 2 == 0 or y in (top, bottom):
                        dot(x, y, "band")
        for s in sorted(self.series, key=lambda s: rank[s.role]):
            line = [(px(x), py(y)) for x, y in sorted(s.points.items()) if math.isfinite(y)]
            for (xa, ya), (xb, yb) in zip(line, line[1:] or line):
                steps = max(abs(xb - xa), abs(yb - ya), 1)
                for i in range(steps + 1):
                    dot(round(xa + (xb - xa) * i / steps), round(ya + (yb - ya) * i / steps), s.role)
        if self.marker is not None and x0 <= self.marker <= x1:
            mx = px(self.marker)
            for y in range(px_h):
                if y % 2 == 0:
                    dot(mx, y, "marker")
        styles = {role: self.get_component_rich_style(f"curve-plot--{role}") for role in rank}
        axis = self.get_component_rich_style("curve-plot--axis")
        out = Text(no_wrap=True, overflow="crop")
        for row in range(height):
            label = fmt(y1) if row == 0 else fmt(y0) if row == height - 1 else (
                fmt((y0 + y1) / 2) if row == height // 2 else "")
            out.append(f"{label:>{AXIS - 1}.{AXIS - 1}}┤" if label else " " * (AXIS - 1) + "│", axis)
            for col in range(width):
                role = owner[row][col]
                out.append(chr(0x2800 + bits[row][col]) if bits[row][col] else " ",
                           styles[role] if role else Style())
            out.append("\n")
        left, right = f"{x0:g}", f"step {x1:g}"
        out.append(" " * AXIS + left + " " * max(width - len(left) - len(right), 1) + right, axis)
        return out


class CurvesPane(Vertical):
    """The plot of one metric at a time (`m` cycles) and the largest deviations."""

    DEFAULT_CSS = """
    CurvesPane { height: 1fr; }
    CurvesPane #curves-legend { height: auto; padding: 0 1; background: $panel; }
    CurvesPane #curves-table { height: auto; max-height: 8; }
    """
    BINDINGS = [
        Binding("m", "next_metric", "Metric", id="curves.metric",
                tooltip="Plot the next metric (loss, grad_norm, ...)"),
    ]

    def __init__(self, db_path: Path, attempts: list[tuple[str, int]], reference_id: int | None,
                 migration_id: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.db_path = db_path
        self.attempts = attempts
        self.reference_id = reference_id
        self.migration_id = migration_id
        self.curves: Curves | None = None
        self.metric_index = 0
        self.marker: int | None = None
        self._pending: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("Loading the metric series…", style="dim"), id="curves-legend")
        yield CurvePlot(id="curves-plot")
        table = DataTable(id="curves-table", cursor_type="row", zebra_stripes=True)
        for label, key in (("Metric", "metric"), ("Step", "step"), ("Value", "value"),
                           ("Against", "against"), ("Diff", "diff")):
            table.add_column(label, key=key)
        yield table

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Read the series again (the reviewer judged an attempt drawn: the tolerance shows)."""
        self._load(self.db_path, self.attempts, self.reference_id, self.migration_id, config.reviewer())

    def sync_blind(self, blind: bool) -> None:
        """Read again if what the reviewer may see changed since the series were read."""
        if self.curves is not None and self.curves.blind != blind:
            self.reload()

    @work(thread=True, exclusive=True, exit_on_error=False, group="curves")
    def _load(self, path: Path, attempts, reference_id, migration_id, reviewer: str) -> None:
        result = read(path, lambda db: load_curves(db, attempts, reference_id, migration_id, reviewer))
        if isinstance(result, LoadFailed):
            self.post_message(result)
        else:
            self.post_message(CurvesLoaded(result))

    def on_curves_loaded(self, message: CurvesLoaded) -> None:
        message.stop()
        self.curves = message.curves
        table = self.query_one(DataTable)
        table.clear()
        blind = self.curves.blind
        if blind and "ratio" in table.columns:
            table.remove_column("ratio")
        elif not blind and "ratio" not in table.columns:
            table.add_column("×tol", key="ratio")
        for name, step, a, r, diff, ratio in deviations(self.curves):
            cells = [text(name), Text(str(step), justify="right"), Text(fmt(a), justify="right"),
                     Text(fmt(r), justify="right"), Text(fmt(diff), justify="right")]
            if not blind:
                cells.append(Text(f"{ratio:.2g}" if math.isfinite(ratio) else "∞",
                                  style=tone("bold $text-error") if ratio > 1 else "", justify="right"))
            table.add_row(*cells)
        pending, self._pending = self._pending, None
        if pending is not None and pending in self.curves.metrics:
            self.metric_index = self.curves.metrics.index(pending)
        self._draw()
        if pending is not None and self.marker is not None:
            self._select(pending, self.marker)

    @property
    def metric(self) -> str | None:
        if not self.curves or not self.curves.metrics:
            return None
        return self.curves.metrics[self.metric_index % len(self.curves.metrics)]

    def _draw(self) -> None:
        legend = self.query_one("#curves-legend", Static)
        plot = self.query_one(CurvePlot)
        name = self.metric
        plot.display = self.query_one("#curves-table").display = name is not None
        if name is None:  # one line saying so, not an empty plot and table below it
            legend.update(Text("No metric series recorded for this attempt.", style="dim"))
            return
        series = self.curves.series[name]
        tol = self.curves.tolerance.get(name)
        out = text(name, "bold")
        if len(self.curves.metrics) > 1:
            out.append(f" ({self.metric_index % len(self.curves.metrics) + 1}/"
                       f"{len(self.curves.metrics)}, m: next)", style="dim")
        for s in series:
            out.append("  ")
            out.append("━━ ", style=plot.get_component_rich_style(f"curve-plot--{s.role}"))
            out.append_text(text(s.label))
            out.append(f" ({len(s.points)})", style="dim")
        if tol is not None and any(s.role == "reference" for s in series):
            out.append("  ")
            out.append("⣿ ", style=plot.get_component_rich_style("curve-plot--band"))
            out.append(f"tol r{tol[0]:g} a{tol[1]:g}")
        elif self.curves.blind:
            out.append("  no tolerance band while you judge blind", style="dim italic")
        if self.marker is not None:
            out.append(f"  │ step {self.marker}", style="bold")
        legend.update(out)
        plot.show(series, tol, self.marker)

    def action_next_metric(self) -> None:
        self.metric_index += 1
        self.marker = None
        self._draw()

    def show_point(self, name: str, step: int) -> None:
        """Plot `name` with a marker at `step` (a verdict's evidence); before the series are read
        (or the pane is mounted), they are plotted so once read."""
        self.marker = step
        if self.curves is not None and name in self.curves.metrics:
            self.metric_index = self.curves.metrics.index(name)
        elif self.curves is None:
            self._pending = name
            return
        else:
            self.app.notify(f"{clean(name)} is not among the plotted metrics", markup=False)
        self._draw()
        self._select(name, step)

    def _select(self, name: str, step: int) -> None:
        """The deviations table's cursor on that metric's row at that step, if it has one."""
        table = self.query_one(DataTable)
        for row in range(table.row_count):
            cells = table.get_row_at(row)
            if cells[0].plain == name and cells[1].plain == str(step):
                table.move_cursor(row=row)
                break
