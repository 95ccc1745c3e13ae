"""Nothing cut off at 1024×768: on every page of the shipped language model and translator, in plain and in
projector mode, no element clips its own text (a box narrower or shorter than the text it holds, with its
overflow hidden or an ellipsis). Data grids scroll and charts wrap their titles (tests/test_browser_projector.py)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from test_browser_axe import PAGES, SETTLED

pytestmark = pytest.mark.browser
CLIPPED = """() => {
  const out = [];
  for (const e of document.querySelectorAll('[data-testid="stAppViewContainer"] *')) {
    const text = (e.innerText || '').trim();
    if (!text || e.children.length > 3 || e.closest('.katex-mathml')) continue;  // MathML: read aloud, not shown
    // The menu's link reserves its bold width with a hidden copy of its label (::after, visibility hidden), which
    // counts in the span's scrollHeight; the label shown is its child, checked on its own.
    if (e.matches('[data-testid="stTopNav"] span[label]')) continue;
    const box = e.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1) continue;  // visually hidden on purpose (a skip link)
    const cs = getComputedStyle(e);
    const hidesX = ['hidden', 'clip'].includes(cs.overflowX) || cs.textOverflow === 'ellipsis';
    const hidesY = ['hidden', 'clip'].includes(cs.overflowY);
    if ((hidesX && e.scrollWidth > e.clientWidth + 1) || (hidesY && e.scrollHeight > e.clientHeight + 1))
      out.push(`${e.tagName}.${e.className} "${text.slice(0, 40)}" ${e.scrollWidth}x${e.scrollHeight} in `
               + `${e.clientWidth}x${e.clientHeight}`);
  }
  return out; }"""


@pytest.mark.parametrize(
    ("model", "projector"), [(m, p) for m in ("lm-english", "translate-en-de") for p in (False, True)]
)
@pytest.mark.parametrize("path", PAGES, ids=[p or "explore" for p in PAGES])
def test_no_text_is_cut_off_at_1024x768(server, browser, path: str, model: str, projector: bool) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        query = {"model": model, **({"projector": "1"} if projector else {})}
        page.goto(f"{server}/{path}?{urlencode(query)}")
        page.wait_for_function(SETTLED)
        page.wait_for_timeout(1500)
        page.wait_for_function(SETTLED)
        clipped = page.evaluate(CLIPPED)
        assert clipped == [], "\n".join(clipped)
    finally:
        context.close()
