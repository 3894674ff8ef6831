"""Draw the Plugin Hub thumbnail, ``docs/hub/thumbnail.png``: four recalled memories as bars, the most relevant
one (accent) moved from third place to the top. Square, a few KB (the Hub allows 20 KB).

    .venv/bin/python bench/hub_thumbnail.py      # needs Pillow (the bench extra brings it)
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

SIZE = 256
SCALE = 4  # drawn at 4x and scaled down, for smooth edges
OUT = Path(__file__).resolve().parent.parent / "docs" / "hub" / "thumbnail.png"
BACKGROUND, PANEL, MUTED, ACCENT, ARROW = "#141b26", "#1f2a3a", "#5d6b80", "#35c9a6", "#c9d3e0"
BAR_H, GAP, TOP = 26, 16, 62
# (length as a fraction of the column, accent) of the stock order; the reranked order sorts by length
STOCK = [(0.62, False), (0.48, False), (0.95, True), (0.34, False)]


def box(*coords: float) -> tuple[float, ...]:
    return tuple(c * SCALE for c in coords)


def column(draw: ImageDraw.ImageDraw, x0: int, width: int, bars: list[tuple[float, bool]]) -> None:
    for row, (length, accent) in enumerate(bars):
        y = TOP + row * (BAR_H + GAP)
        draw.rounded_rectangle(box(x0, y, x0 + width * length, y + BAR_H), radius=7 * SCALE,
                               fill=ACCENT if accent else MUTED)


def main() -> None:
    image = Image.new("RGB", (SIZE * SCALE, SIZE * SCALE), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle(box(12, 12, SIZE - 12, SIZE - 12), radius=36 * SCALE, fill=PANEL)
    column(draw, 34, 78, STOCK)
    column(draw, 150, 78, sorted(STOCK, key=lambda bar: -bar[0]))
    x0, x1, y = 116, 144, TOP + 1.5 * (BAR_H + GAP) + BAR_H / 2  # the arrow between the columns
    draw.line(box(x0, y, x1 - 10, y), fill=ARROW, width=7 * SCALE)
    draw.polygon([box(x1, y), box(x1 - 16, y - 13), box(x1 - 16, y + 13)], fill=ARROW)
    image.resize((SIZE, SIZE), Image.Resampling.LANCZOS).quantize(colors=48).save(OUT, optimize=True)
    print(f"{OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
