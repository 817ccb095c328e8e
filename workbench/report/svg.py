"""Inline SVG charts for the HTML report: a migration's ladder and its loss curves."""

from __future__ import annotations

from html import escape
from operator import itemgetter

from workbench.report.model import MigrationReport

W, H = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 14, 30


def _frame(title: str, body: list[str], x_label: str, y_ticks: list[tuple[float, str]]) -> str:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}"'
             f' role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
             f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" class="axis"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" class="axis"/>']
    for y, label in y_ticks:
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    parts.append(f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 6}" text-anchor="middle">{escape(x_label)}</text>')
    return "".join(parts + body + ["</svg>"])


def ladder_chart(m: MigrationReport) -> str:
    """Each attempt's highest verified level as a bar; a tick where its agent expected more. A group's
    attempts (workbench.report.model.AttemptGroup) each get its bar, at their seqs."""
    attempts = sorted(((seq, a) for a in m.attempt_facts if a.verified and not a.is_rerun
                       for seq in getattr(a, "member_seqs", ()) or (a.seq,)), key=itemgetter(0))
    title = f"{m.slug}: highest verified level per attempt"
    plot_h = H - TOP - BOTTOM
    y_of = lambda level: H - BOTTOM - plot_h * level / 5  # noqa: E731
    ticks = [(y_of(level), f"L{level}") for level in range(0, 6)]
    if not attempts:
        return _frame(title, [f'<text x="{W / 2:.0f}" y="{H / 2:.0f}" text-anchor="middle">no verified attempts'
                              "</text>"], "attempt", ticks)
    width = (W - LEFT - RIGHT) / len(attempts)
    bar_width = f"{max(width * 0.7, 0.5):.1f}"
    body = []
    shapes: dict[tuple[int, str, int | None], tuple[str, str, str, str | None]] = {}
    for i, (seq, a) in enumerate(attempts):
        x = LEFT + i * width
        level = a.level or 0
        kind = "silent" if a.silent else "failed" if a.failed else "ok"
        shape = shapes.get((level, kind, a.expected_level))
        if shape is None:  # a bar's height, its title's tail and its dash: a few dozen shapes a study
            shape = shapes[level, kind, a.expected_level] = _bar_shape(level, kind, a.expected_level, y_of)
        top, tail, label, ey = shape
        body.append(f'<rect x="{x + width * 0.15:.1f}" y="{top}" width="{bar_width}"{tail}{seq}{label}')
        if ey is not None:
            body.append(f'<line x1="{x:.1f}" y1="{ey}" x2="{x + width:.1f}" y2="{ey}" class="expected"/>')
    if len(attempts) <= 40:
        for i, (seq, _) in enumerate(attempts):
            body.append(f'<text x="{LEFT + (i + 0.5) * width:.1f}" y="{H - BOTTOM + 12}" text-anchor="middle"'
                        f' class="small">{seq}</text>')
    return _frame(title, body, "attempt (bar: level reached; dash: level the agent expected)", ticks)


def _bar_shape(level: int, kind: str, expected: int | None, y_of) -> tuple[str, str, str, str | None]:
    """A bar's y, its markup from the height to its title's seq, the title after the seq (an int:
    nothing to escape) and the dash's y (None: no dash)."""
    top = y_of(max(level, 0.08))
    label = (f": L{level}" + (f", expected L{expected}" if expected is not None else "")
             + (", silent failure" if kind == "silent" else ", failed" if kind == "failed" else ""))
    return (f"{top:.1f}", f' height="{H - BOTTOM - top:.1f}" class="bar {kind}"><title>#',
            f"{escape(label)}</title></rect>",
            f"{y_of(expected):.1f}" if expected is not None and expected > level else None)


def loss_chart(m: MigrationReport) -> str:
    """The reference run's loss and the final run's, by step."""
    title = f"{m.slug}: loss, reference and final run"
    series = {k: v for k, v in m.loss.items() if v}
    if not series:
        return ""
    steps = [s for points in series.values() for s, _ in points]
    values = [v for points in series.values() for _, v in points if v == v and abs(v) != float("inf")]
    if not values:
        return ""
    s0, s1 = min(steps), max(steps)
    v0, v1 = min(values), max(values)
    if v1 == v0:
        v0, v1 = v0 - 0.5, v1 + 0.5
    if s1 == s0:
        s1 = s0 + 1
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    y_of = lambda v: H - BOTTOM - plot_h * (v - v0) / (v1 - v0)  # noqa: E731
    body = []
    for name in ("reference", "final"):
        points = [(s, v) for s, v in series.get(name, []) if v == v and abs(v) != float("inf")]
        if not points:
            continue
        if len(points) > 400:  # enough for 640 px
            stride = len(points) / 400
            points = [points[int(i * stride)] for i in range(400)] + [points[-1]]
        # x_of and y_of written out: two calls a point were a third of the chart (~190,000 points)
        path = " ".join([f"{LEFT + plot_w * (s - s0) / (s1 - s0):.1f},{H - BOTTOM - plot_h * (v - v0) / (v1 - v0):.1f}"
                         for s, v in points])
        body.append(f'<polyline points="{path}" class="line {name}"><title>{name}</title></polyline>')
    body.append(f'<text x="{W - RIGHT}" y="{TOP + 10}" text-anchor="end" class="legend">'
                '<tspan class="reference">reference</tspan> · <tspan class="final">final run</tspan></text>')
    ticks = [(y_of(v), f"{v:.3g}") for v in (v0, (v0 + v1) / 2, v1)]
    return _frame(title, body, f"step ({s0}–{s1})", ticks)
