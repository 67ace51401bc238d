"""Overlapping text in an exported chart (SVG), measured in chromium: the bounding box of every drawn label.

A chart's SVG is loaded into a Playwright page; each ``<text>`` element that draws something (non-blank,
not hidden, not transparent) gives its box in its own coordinates (``getBBox``) mapped to the screen by
its transform (``getScreenCTM``), so rotated labels keep their true outline. Two labels overlap when their
outlines intersect (separating-axis test on the two rectangles) after each is shrunk by ``INSET`` — the
font's ascent and descent pad a text box beyond its glyphs, so rows set at exactly their line height touch.
"""

from __future__ import annotations

#: Shrink of each label's box before the test (px on each side: horizontal, vertical): the box's padding.
INSET = (1.0, 0.18)  # 1 px left and right; 18% of the box's height top and bottom

_JS = """([inset, minus, root]) => {
  const out = [];
  for (const el of document.querySelector(root).querySelectorAll('svg text')) {
    const text = (el.textContent || '').trim();
    if (!text) continue;
    let hidden = false;
    for (let e = el; e && e.tagName && e.tagName.toLowerCase() !== 'html'; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0
          || parseFloat(e.getAttribute('opacity') ?? '1') === 0 || parseFloat(cs.fillOpacity) === 0) { hidden = true; break; }
    }
    if (hidden) continue;
    const b = el.getBBox();
    if (b.width < 0.5 || b.height < 0.5) continue;
    const dx = Math.min(inset, b.width / 4), dy = b.height * minus;
    const m = el.getScreenCTM();
    const pts = [[b.x + dx, b.y + dy], [b.x + b.width - dx, b.y + dy], [b.x + b.width - dx, b.y + b.height - dy],
                 [b.x + dx, b.y + b.height - dy]].map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
    out.push({text, pts});
  }
  return out;
}"""


def _project(pts, axis) -> tuple[float, float]:
    vals = [p[0] * axis[0] + p[1] * axis[1] for p in pts]
    return min(vals), max(vals)


def _intersect(a, b) -> bool:
    """Whether the convex quadrilaterals ``a`` and ``b`` (4 corner points each, in order) overlap (SAT)."""
    for poly in (a, b):
        for i in range(4):
            (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % 4]
            axis = (y1 - y2, x2 - x1)
            lo_a, hi_a = _project(a, axis)
            lo_b, hi_b = _project(b, axis)
            if hi_a <= lo_b or hi_b <= lo_a:
                return False
    return True


def text_boxes(page, svg: str) -> list[dict]:
    """``[{"text", "pts"}]``: every drawn label of ``svg`` (the file's text) with its 4 corners (px), shrunk by
    ``INSET``; ``page``: a Playwright page (its content is replaced)."""
    page.set_content(f"<!DOCTYPE html><html><body style='margin:0'>{svg}</body></html>")
    return page.evaluate(_JS, [*INSET, "body"])


def _pairs(boxes: list[dict]) -> list[tuple[str, str]]:
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:] if _intersect(a["pts"], b["pts"])]


def svg_overlaps(page, svg: str) -> list[tuple[str, str]]:
    """Pairs of labels of ``svg`` whose outlines intersect (``text_boxes``), as (text, text); empty when none."""
    return _pairs(text_boxes(page, svg))


def shown_overlaps(page, selector: str) -> list[tuple[str, str]]:
    """The same for a chart drawn on a dashboard page (Plotly draws SVG): the labels inside the first element
    matching the CSS ``selector``."""
    return _pairs(page.evaluate(_JS, [*INSET, selector]))
