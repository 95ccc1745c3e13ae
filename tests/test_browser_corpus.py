"""The Corpus page in a real browser, on each shipped profile (corpora/*/profile), in projector mode at 1024×768 and
at 1600×900: it draws without error, its first figure (the layer × head map) and the sentence that says what to look
at in it are whole in the first view, no text is cut off or drawn under the element below it, and axe-core finds no
serious or critical violation. Then what the page offers, from the page: a top context's link opens Explore at that
text, head and query; another head redraws the distribution, the top contexts and the query/key map; the heads'
clusters are drawn; another sampled token lists the contexts like it. Screenshots go to screenshots/corpus/
(git-ignored)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode, urlparse

import numpy as np
import pytest
from browser_support import CLIPPED, OVERLAPPED, hold_still, settle, settled_violations
from test_browser import SHOTS, drawn_without_error
from test_browser_first_figure import BOXES, CHART, SAYS

from analysis.corpus.maps import head_clusters, nearest
from analysis.corpus.store import open_corpus, profile_folders
from ui import state
from views.corpus import NEIGHBOURS, PROFILES

pytestmark = pytest.mark.browser
SCREENS = {"1024x768": (1024, 768), "1600x900": (1600, 900)}
SHIPPED = list(profile_folders(PROFILES))
MAIN = "[data-testid='stMain']"


def _whole(box: dict | None, width: int, height: int) -> bool:
    return box is not None and box["top"] >= -1 and box["bottom"] <= height + 1 and box["right"] <= width + 1


def _open(browser, server: str, width: int, height: int, **query: str):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(f"{server}/corpus?{urlencode({'projector': '1', **query})}")
    settle(page)
    page.locator(CHART).first.wait_for()
    drawn_without_error(page)
    return context, page


def test_two_profiles_are_shipped() -> None:
    assert SHIPPED == ["induction-brown", "lm-english-brown"]


@pytest.mark.parametrize("screen", list(SCREENS))
@pytest.mark.parametrize("name", SHIPPED)
def test_each_profile_on_a_projector_draws_its_map_first_whole_and_clean(server, browser, name, screen) -> None:
    width, height = SCREENS[screen]
    context, page = _open(browser, server, width, height, corpus=name)
    try:
        shot = SHOTS / "corpus" / f"{name}-{screen}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        seen = page.evaluate(BOXES, [CHART, SAYS])
        page.screenshot(path=str(shot))
        where = f"/corpus?corpus={name}&projector=1 at {width}×{height} (screenshot: {shot})"
        title = page.locator(f"{CHART} .gtitle").first.text_content() or ""
        assert title.startswith("Every head over the corpus"), f"{where}: the first chart is {title!r}"
        assert _whole(seen["figure"], width, height), f"{where}: the map is not whole in the first view: {seen}"
        assert _whole(seen["says"], width, height), f"{where}: its sentence is not in the first view: {seen}"
        model = open_corpus(PROFILES / name / "profile").manifest["identity"]["model"]["name"]
        assert model in page.locator(SAYS).inner_text()
        assert page.evaluate(CLIPPED) == [], f"{where}: text cut off"
        covered = page.evaluate(OVERLAPPED)
        assert covered == [], f"{where}: text under the element below it: {covered}"
        violations = settled_violations(page, settled=True)
        assert violations == [], f"{where}:\n" + "\n".join(violations)
        _shots(page, f"{name}-{screen}")
    finally:
        context.close()


def _shots(page, stem: str) -> None:
    """Screenshots of the whole page, a window at a time (its main area scrolls, not the document), each taken once
    the page holds still: screenshots/corpus/`stem`-1.png, -2.png, …"""
    height = page.viewport_size["height"]
    total = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    for i, top in enumerate(range(0, total, height - 100), start=1):
        page.evaluate(f"() => {{ document.querySelector('[data-testid=stMain]').scrollTop = {top}; }}")
        hold_still(page)
        page.screenshot(path=str(SHOTS / "corpus" / f"{stem}-{i}.png"))
    page.evaluate("() => { document.querySelector('[data-testid=stMain]').scrollTop = 0; }")


# The first data grid's first row's link (the top contexts' "open" column): Streamlit draws a data grid on a canvas
# and keeps each cell's text, for screen readers, in a table it hides; and the grid's row height (the header's too).
FIRST_ROW = f"""() => {{
  const grid = document.querySelector("{MAIN} [data-testid='stDataFrame']");
  const open = [...grid.querySelectorAll('table th')].findIndex(th => th.innerText.trim() === 'open');
  const cell = grid.querySelector(`table tbody tr td[aria-colindex="${{open + 1}}"]`);
  const rows = +grid.querySelector('table').getAttribute('aria-rowcount');
  return {{href: cell ? cell.textContent : null, row: grid.querySelector('.dvn-scroller').scrollHeight / rows}}; }}"""


def _click_link(context, page, row: float):
    """Click the first row's "in Explore" as a person does, and the page it opens in a new tab. The grid draws the
    link on its canvas, in its last column, and opens it on a click on the link's text only: the click walks along
    the middle of the row's last column (never on the header, whose click sorts the table)."""
    grid = page.locator(f"{MAIN} [data-testid='stDataFrame']").first
    grid.scroll_into_view_if_needed()
    hold_still(page)
    box = grid.bounding_box()
    opened = []
    context.on("page", lambda new: opened.append(new))
    middle = box["y"] + 1.5 * row
    for y in range(int(middle) - 8, int(middle) + 9, 2):
        for x in range(int(box["x"] + box["width"]) - 100, int(box["x"] + box["width"]) - 20, 20):
            page.mouse.move(x, y)
            page.wait_for_timeout(30)
            page.mouse.click(x, y)
            page.wait_for_timeout(60)
            if opened:
                return opened[0]
    raise AssertionError("no click along the first top context's link opened a page")


def test_a_top_context_opens_explore_at_its_text_head_and_query(server, browser) -> None:
    name = "induction-brown"
    context, page = _open(browser, server, *SCREENS["1024x768"], corpus=name)
    try:
        first = page.evaluate(FIRST_ROW)
        corpus = open_corpus(PROFILES / name / "profile")
        best = corpus.heads.loc[corpus.heads["induction"].idxmax()]
        top = corpus.top_contexts(int(best["layer"]), int(best["head"]))
        text = corpus.sql(f"SELECT content FROM texts WHERE text = {int(top['text'].iloc[0])}")["content"].iloc[0]
        assert first["href"], "the top contexts' table holds no link"
        explore = _click_link(context, page, first["row"])
        explore.set_default_timeout(90_000)
        explore.wait_for_load_state()
        assert explore.url == f"{server}/{first['href'].removeprefix('./')}"
        link = parse_qs(urlparse(explore.url).query)
        assert link["model"] == ["induction"] and link["projector"] == ["1"]  # on the projector still
        assert link["L"] == [str(best["layer"])] and link["H"] == [str(best["head"])]
        assert link["point"] == [str(top["query"].iloc[0])]
        assert state.unpack_text(link["text"][0]) == text
        settle(explore)
        explore.locator(CHART).first.wait_for()
        drawn_without_error(explore)
        box = explore.get_by_role("textbox", name="Text", exact=True, include_hidden=True)  # the folded sidebar's
        assert box.input_value() == text
        explore.screenshot(path=str(SHOTS / "corpus" / "explore-from-a-top-context.png"))
    finally:
        context.close()


def _chart_title(page, key: str) -> str:
    return page.locator(f"{MAIN} .st-key-{key} .gtitle").first.text_content() or ""


def _grid_column(page, index: int, header: str) -> list[str]:
    """The cells of the column `header` of the `index`-th data grid of the main area (its hidden table: the rows in
    view)."""
    return page.evaluate(
        f"""() => {{
      const grid = document.querySelectorAll("{MAIN} [data-testid='stDataFrame']")[{index}];
      const at = [...grid.querySelectorAll('table th')].findIndex(th => th.innerText.trim() === {header!r}) + 1;
      return [...grid.querySelectorAll(`table tbody td[aria-colindex="${{at}}"]`)].map(td => td.textContent); }}"""
    )


def test_another_head_another_token_and_the_clusters_from_the_page(server, browser) -> None:
    """On lm-english's profile: choosing another head redraws its distribution, its top contexts and its query/key
    map; the heads' clusters hold every head; choosing another sampled token lists the contexts nearest it."""
    from test_browser_walk import choose_other

    name = "lm-english-brown"
    context, page = _open(browser, server, *SCREENS["1600x900"], corpus=name)
    try:
        corpus = open_corpus(PROFILES / name / "profile")
        before = _grid_column(page, 0, "snippet")
        choose_other(page, "Head")
        settle(page)
        drawn_without_error(page)
        layer, head = (int(page.get_by_role("combobox", name=k, exact=True).input_value()) for k in ("Layer", "Head"))
        for key in ("corpus_distribution", "corpus_vectors"):
            assert _chart_title(page, key).startswith(f"Layer {layer}, head {head}:"), key
        snippets = _grid_column(page, 0, "snippet")
        assert len(snippets) >= 5 and snippets != before  # the rows drawn: the grid keeps the ones in view
        assert snippets == list(corpus.top_contexts(layer, head)["snippet"])[: len(snippets)]
        sample = corpus.sample(layer, head)
        vectors = page.locator(f"{MAIN} .st-key-corpus_vectors .scatterlayer .point")
        assert vectors.count() == 2 * len(sample)  # a query and a key a sampled position
        found = head_clusters(corpus.heads, corpus.offsets)
        assert page.locator(f"{MAIN} .st-key-corpus_clusters .hm").count() == 1
        points = page.locator(f"{MAIN} .st-key-corpus_cluster_map .scatterlayer .point")
        assert points.count() == len(corpus.heads)  # every head on the map, a colour (a legend entry) a cluster
        assert page.locator(f"{MAIN} .st-key-corpus_cluster_map .legendtext").count() == len(set(found.cluster))
        near_before = _grid_column(page, 1, "context")
        choose_other(page, "A sampled token")
        settle(page)
        drawn_without_error(page)
        # the neighbours' grid redraws after the choice's rerun: read it once it shows another list
        page.wait_for_function(f"""() => {{
          const grid = document.querySelectorAll("{MAIN} [data-testid='stDataFrame']")[1];
          const cells = [...grid.querySelectorAll('table tbody td')].map(td => td.textContent);
          return cells.length > 0 && !{json.dumps(near_before)}.every(c => cells.includes(c)); }}""")
        settle(page)
        pick = int(parse_qs(urlparse(page.url).query)["corpus_point"][0]) - 1
        queries = np.stack(sample["query_vector"].to_numpy())
        expected = [sample["context"].iloc[i] for i, _ in nearest(queries, pick, NEIGHBOURS)]
        near = _grid_column(page, 1, "context")
        assert len(near) >= 5 and near == expected[: len(near)] and near != near_before
        _shots(page, f"{name}-another-head")
    finally:
        context.close()
