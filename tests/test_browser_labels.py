"""Token labels in chromium at 1024×768: at 256 tokens Explore's head chart names position and
piece in every cell's hover, its axes read `position:piece`, and SmolLM2's byte-level pieces never show raw (Ġ, Ċ).
On a 390×844 phone no two tick labels of a chart touch (viz.ticks thins them to the chart's width): the Lesson's
induction step, about 100 keys a chart, and Explore."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import pytest
import test_browser_pretrained
from browser_support import SETTLED, settle
from test_browser import SHOTS

from inference.pretrained.packages import SMOLLM2

pytestmark = pytest.mark.browser
LONG = "The cat sat on the mat, and the dog sat by the door. " * 30  # cut to lm-english's 256 tokens
CHART = ".st-key-head_chart .js-plotly-plot"
# Every cell of the drawn figure is on its row's and its column's category, the token label `i:piece` from 1
# (viz.style.category_axis), and the hover reads them (%{y}, %{x}); the ticks, at most 48, read the category
# they sit on. Returns what is wrong, [] when nothing is.
CHECK = """(sel) => {
  const plot = document.querySelector(sel), trace = plot.data[0], axes = plot.layout, wrong = [];
  const label = /^(\\d+):\\S+$/;
  for (const [name, cats] of [["y", trace.y], ["x", trace.x]]) {
    if (!cats || cats.length !== 256) wrong.push(`${name} of ${cats && cats.length} categories`);
    (cats || []).forEach((text, i) => {
      const m = label.exec(text);
      if (!m || +m[1] !== i + 1) wrong.push(`${name} ${i}: ${text}`);
    });
  }
  if (!trace.hovertemplate.startsWith("query %{y} → key %{x}: ")) wrong.push(trace.hovertemplate);
  for (const a of [axes.xaxis, axes.yaxis]) {
    if (a.type !== "category") wrong.push(`a ${a.type} axis`);
    if (a.ticktext.length > 48) wrong.push(`${a.ticktext.length} ticks`);
    a.ticktext.forEach((t, k) => { if (t !== a.tickvals[k] || !label.test(t)) wrong.push(`tick ${t}`); });
  }
  return wrong.slice(0, 5);
}"""


def hover_at(page, fx: float, fy: float) -> str:
    """The hover text of the head chart at (fx, fy) of its plot area, e.g. between two labelled ticks."""
    plot = page.locator(f"{CHART} .nsewdrag").first
    plot.scroll_into_view_if_needed()  # below the fold at 1024×768: a mouse outside the window hovers nothing
    box = plot.bounding_box()
    plot.hover(position={"x": box["width"] * fx, "y": box["height"] * fy}, force=True)
    hover = page.locator(".st-key-head_chart .hoverlayer .hovertext").first
    hover.wait_for()
    return hover.text_content().strip()


def opened(browser, url: str, timeout: int):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(timeout)
    page.goto(url)
    page.wait_for_function(SETTLED)
    page.locator(f"{CHART} .heatmaplayer image, {CHART} .heatmaplayer .hm").first.wait_for(state="attached")
    return context, page


def test_every_cell_of_a_256_token_head_names_position_and_piece(server, browser) -> None:
    context, page = opened(browser, f"{server}/?model=lm-english&text={quote(LONG)}", 90_000)
    try:
        assert page.evaluate(CHECK, CHART) == []
        # cells between the labelled ticks (every 6th of 256): query 208, key 95; query 141, key 34
        for fx, fy in ((0.37, 0.81), (0.13, 0.55)):
            text = hover_at(page, fx, fy)
            found = re.fullmatch(r"query (\d+):\S+ → key (\d+):\S+: [01]\.\d{3}", text)
            assert found, text
            query, key = int(found[1]), int(found[2])
            assert abs(query - (fy * 256 + 1)) <= 2 and abs(key - (fx * 256 + 1)) <= 2, text  # the cell under the mouse
    finally:
        context.close()


@pytest.fixture
def pretrained(published_server: str) -> str:
    """The session's server with the published models (tests/conftest.py)."""
    return published_server


@pytest.mark.slow
def test_smollm2_pieces_are_shown_as_text_never_as_raw_bytes(pretrained, browser) -> None:
    text = test_browser_pretrained.MODELS[SMOLLM2.name] + " Paris. Its rights"  # Ċ: tests/test_labels.py
    context, page = opened(browser, f"{pretrained}/?model={quote(SMOLLM2.name)}&text={quote(text)}", 180_000)
    try:
        shown = page.evaluate(
            f"""() => {{ const p = document.querySelector('{CHART}');
                return JSON.stringify([p.data[0].x, p.layout.xaxis.ticktext]); }}"""
        )
        assert not re.search("[ĠĊ]", shown), shown[:300]
        assert "10:▁rights" in shown  # `Ġrights`, as the text it stands for
        assert not re.search("[ĠĊ]", page.locator("[data-testid='stMain']").inner_text())
    finally:
        context.close()


# Every chart's shown tick labels (x and y, every subplot's) whose boxes touch: each label's box turned as it is drawn
# (getBBox through getScreenCTM, four corners on the screen), two boxes apart where some edge's normal separates
# them by more than 1 px (the separating axis test). A label hidden by CSS, or in a hidden group, is not drawn.
OVERLAPPING = """() => {
  const shown = t => { for (let e = t; e && e.tagName !== 'svg'; e = e.parentElement) {
      const s = getComputedStyle(e); if (s.display === 'none' || s.visibility === 'hidden') return false; }
    return t.textContent.trim() !== ''; };
  const corners = t => { const b = t.getBBox(), m = t.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
  const apart = (p, q) => { for (const s of [p, q]) for (let i = 0; i < 4; i++) {
      const [x0, y0] = s[i], [x1, y1] = s[(i + 1) % 4], len = Math.hypot(x1 - x0, y1 - y0);
      if (!len) continue;
      const on = r => r.map(([x, y]) => (x * (y0 - y1) + y * (x1 - x0)) / len), a = on(p), b = on(q);
      if (Math.min(Math.max(...a), Math.max(...b)) - Math.max(Math.min(...a), Math.min(...b)) <= 1) return true; }
    return false; };
  const out = [];
  document.querySelectorAll("[data-testid='stMain'] .stPlotlyChart").forEach((chart, c) => {
    const labels = [...chart.querySelectorAll('.xaxislayer-above text, .yaxislayer-above text')].filter(shown)
      .map(t => ({text: t.textContent, box: corners(t)}));
    const touching = [];
    for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++)
      if (!apart(labels[i].box, labels[j].box)) touching.push(`"${labels[i].text}" on "${labels[j].text}"`);
    const title = (chart.querySelector('.gtitle') || {}).textContent || '';
    if (touching.length) out.push(`chart ${c + 1} (${title.slice(0, 40)}): ${touching.length} pairs of its `
                                  + `${labels.length} tick labels touch, ${touching.slice(0, 2).join(', ')}`);
  });
  return out; }"""
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.mark.parametrize(
    "query",
    [
        pytest.param({"model": "reverse", "lesson": "induction-heads"}, id="lesson-induction-heads"),
        pytest.param({"model": "lm-english"}, id="explore"),
    ],
)
def test_no_two_tick_labels_touch_on_a_phone(server, browser, query: dict) -> None:
    """The Lesson's step 13 on reverse (shown on lm-english: its repeated run of 100 tokens, the head, a sentence
    and the head at three snapshots) and Explore: Plotly draws every tick it is given, 34 keys in 126 px of axis."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(90_000)
    path = "lesson" if "lesson" in query else ""
    try:
        page.goto(f"{server}/{path}?{urlencode(query)}")
        settle(page)
        skip = page.get_by_role("button", name="Show without answering")
        if skip.count():  # a student alone is asked first (views/lesson_steps/quiz.py)
            skip.first.click()
            page.get_by_text("You did not answer.", exact=False).wait_for()
            settle(page)
        charts = page.locator("[data-testid='stMain'] .stPlotlyChart .xaxislayer-above")
        charts.first.wait_for(state="attached")
        assert charts.count() >= (3 if path else 1)
        touching = page.evaluate(OVERLAPPING)
        page.screenshot(path=str(SHOTS / f"labels-phone-{path or 'explore'}.png"))
        assert touching == [], "\n".join(touching)
    finally:
        context.close()
