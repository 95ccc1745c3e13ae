"""One walk through every page in chromium at 1024×768, as a person would: on each page of ui/pages.py every choice
the page keeps is changed (a different option, a nudged slider, a typed text), the page's widgets are read, and
the walk goes on through the menu. Then the last page's address is opened in a fresh browser, on every page, and
each must show the same widgets with the same values: kept across the pages of one session (nothing reset by
another page's rerun) and in the URL. A text over 1,000 characters opens from its link too (compressed)."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import pytest
from browser_support import SETTLED

from ui.pages import PAGES
from ui.state import PACKED, PLAIN_LONGEST

pytestmark = pytest.mark.browser
START = {"model": "lm-english", "text": "The cat sat on the mat."}
TOUCHED: list[str] = []  # the labels of the widgets the walk changed on the current page
KINDS = (
    "stSelectbox stRadio stSlider stCheckbox stToggle stTextInput stTextArea stMultiSelect stNumberInput stButtonGroup"
)
# Every widget on the page by its label → the value it shows (a selectbox its option's label, a slider its thumb's).
WIDGETS = """(kinds) => Object.fromEntries([...document.querySelectorAll(
        kinds.split(' ').map(k => `[data-testid=${k}]`).join())].map(el => {
    const kind = el.dataset.testid, label = el.querySelector('[data-testid=stWidgetLabel]')?.innerText.trim() || kind;
    const picked = [...el.querySelectorAll('input:checked')].map(i => i.closest('label').innerText.trim());
    const value = {
        stRadio: () => picked.join(),
        stCheckbox: () => String(el.querySelector('input').checked),
        stToggle: () => String(el.querySelector('input').checked),
        stSlider: () => [...el.querySelectorAll('input[type=range]')].map(s => s.getAttribute('aria-valuetext')
            || s.value).join(),
        stTextArea: () => el.querySelector('textarea').value,
        stMultiSelect: () => [...el.querySelectorAll('[data-tag]')].map(t => t.getAttribute('aria-label')).join('|'),
        stButtonGroup: () => [...el.querySelectorAll('button')].map(b => b.innerText.trim() + ':'
            + (b.getAttribute('aria-pressed') ?? b.getAttribute('aria-checked') ?? b.getAttribute('kind'))).join('|'),
    }[kind] ?? (() => el.querySelector('input')?.value ?? el.innerText);
    return [label, value()];
}))"""


# While a long first run works, Streamlit draws grey skeletons where the widgets will be, the sidebar's included.
NO_SKELETON = """() => !document.querySelector('[data-testid="stSkeleton"]')"""


HOLD_MS = 700  # how long the widgets must hold still: a fragment or a chart can rerun once after the first run


def settled_widgets(page) -> dict[str, str]:
    page.wait_for_function(SETTLED)
    page.wait_for_function(NO_SKELETON)
    return page.evaluate(WIDGETS, KINDS)


def settle(page) -> dict[str, str]:
    """Wait until the page has settled, no widget is still a skeleton, and its widgets hold still: the same values
    read twice, HOLD_MS apart, the page settled at both reads; the widgets' values by label."""
    last = settled_widgets(page)
    for _ in range(20):
        page.wait_for_timeout(HOLD_MS)
        now = settled_widgets(page)
        if now and now == last:
            return now
        last = now
    return last


def go(page, title: str) -> None:
    """Open page `title` through the menu at the top: its own link, or its section's drop-down."""
    shown = next(p for p in PAGES if p.title == title)
    menu = page.locator('[data-testid="stTopNav"]')
    if getattr(shown, "section", ""):
        menu.get_by_role("button", name=shown.section, exact=True).click()
        page.get_by_role("menuitem", name=title, exact=True).click()
    else:
        menu.get_by_role("link", name=title, exact=True).click()
    page.wait_for_function(f"() => location.pathname === '/{shown.url_path}'")


def box(page, kind: str, label: str):
    """The widget of `kind` (a data-testid) labelled exactly `label`."""
    return page.locator(f'[data-testid="{kind}"]').filter(has=page.get_by_text(label, exact=True)).first


def changed(page, address: str, label: str) -> None:
    """Wait until the address is no longer `address`: the server has run the change of the widget labelled `label`
    (every kept choice is in the URL), so that the next change does not race its rerun."""
    page.wait_for_function("address => location.href !== address", arg=address)
    TOUCHED.append(label)
    settle(page)


def choose_other(page, label: str, tries: int = 4) -> None:
    """Pick, in the selectbox or multiselect labelled `label`, an option it does not show now (the last one that is
    not; none when it has one option); a rerun that closes the open list opens it again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    combo = page.get_by_role("combobox", name=label, exact=True).first
    for attempt in range(tries):
        now, address = combo.input_value(), page.url
        # Scrolled into view first, as a person would: clicked below the first view, a box is scrolled to the
        # window's edge and its list does not open (the retry below waited 15 s for it).
        combo.scroll_into_view_if_needed()
        combo.click()
        try:
            options = page.get_by_role("option")
            options.first.wait_for(timeout=15_000)
            names = [t.strip() for t in options.all_inner_texts()]
            other = [n for n in names if n and n != now]
            if not other:  # one option: nothing to choose
                page.keyboard.press("Escape")
                return
            options.filter(has_text=other[-1]).last.click(timeout=15_000)
            changed(page, address, label)
            if combo.get_attribute("aria-expanded") == "true":  # a multiselect's list stays open
                page.keyboard.press("Escape")
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")


def radio_other(page, label: str) -> None:
    group, address = box(page, "stRadio", label), page.url
    group.locator("label").filter(has_not=page.locator("input:checked")).last.click()
    changed(page, address, label)


def nudge(page, label: str, key: str) -> None:
    """Move the slider labelled `label` one step with `key` (ArrowLeft, ArrowRight)."""
    thumb, address = box(page, "stSlider", label).locator("input[type=range]").first, page.url
    thumb.focus()
    thumb.press(key)
    thumb.blur()
    changed(page, address, label)


def type_text(page, label: str, text: str) -> None:
    field, address = page.get_by_label(label, exact=True).first, page.url
    field.fill(text)
    field.press("Control+Enter" if field.evaluate("e => e.tagName") == "TEXTAREA" else "Enter")
    changed(page, address, label)


def explore(page) -> None:
    choose_other(page, "Layer")
    choose_other(page, "Head")
    radio_other(page, "Show")
    choose_other(page, "Next token after")


def lesson(page) -> None:
    address = page.url
    page.get_by_role("button", name="Next →").first.click()  # the step: the URL's `lesson`
    changed(page, address, "Step")
    radio_other(page, "Sentence")  # the lesson's sentence or the sidebar's (`sentence` in the URL)


def generate(page) -> None:
    type_text(page, "Tokens to write", "12")
    radio_other(page, "Decoding")
    if page.get_by_label("Seed", exact=True).count():
        type_text(page, "Seed", "7")
    # Not changed: "Decoding step", kept in the URL but dropped on another page (views/generate.py: GEN_STEP), nor
    # "Write instead" and "Compare the heads at step", which belong to that step (FORK, FORK_AT).


def paper(page) -> None:
    choose_other(page, "Lines of")
    nudge(page, "Hide weights below", "ArrowRight")


def attention_math(page) -> None:
    choose_other(page, "Query token")
    split, address = "Split the score into the stream's parts", page.url
    page.get_by_text(split, exact=True).click()
    changed(page, address, split)
    choose_other(page, "Key token")


def positional(page) -> None:
    nudge(page, "Positions shown", "ArrowLeft")
    choose_other(page, "Dimensions")
    radio_other(page, "Similarity")


def masks(page) -> None:
    type_text(page, "Second sentence", "A dog barked twice at the moon.")


def rollout(page) -> None:
    address = page.url
    box(page, "stCheckbox", "Residual").locator("label").first.click()
    changed(page, address, "Residual")
    nudge(page, "Through layer", "ArrowLeft")
    address = page.url
    box(page, "stButtonGroup", "Heads averaged").get_by_role("button").first.click()  # one head fewer
    changed(page, address, "Heads averaged")


def head_statistics(page) -> None:
    choose_other(page, "Pattern")
    type_text(page, "More texts, one a line (up to 20); the sidebar's text is always the first", "A cat sat. A cat.")
    radio_other(page, "Composition")
    # Not changed: "Head to open", a row of the table kept in the session only (views/head_stats.py: STATS_PICK).


def ablation(page) -> None:
    choose_other(page, "Heads to switch off")
    radio_other(page, "Ablation")
    radio_other(page, "Ranking")


def attribution(page) -> None:
    choose_other(page, "Token")
    choose_other(page, "Versus")


def compare(page) -> None:
    type_text(page, "Second text (the first is the sidebar's)", "The dog sat on the rug.")
    for label in ("Patch", "Method", "Answer (the first text's)", "Versus"):
        if page.get_by_role("combobox", name=label, exact=True).count():
            choose_other(page, label)


def experiment(page) -> None:
    choose_other(page, "Pruned model")
    nudge(page, "Heads removed", "ArrowRight")
    choose_other(page, "A model of the table")


def corpus(page) -> None:
    choose_other(page, "Colour each head by")
    choose_other(page, "Head")


def nothing(page) -> None:
    """A page whose widgets are all deliberately not kept (Training steps: its step is dropped on another page, as
    Generate's; Open a trace file: a file cannot be in a URL)."""


CHANGES = {
    "Explore": explore,
    "Lesson": lesson,
    "Generate": generate,
    "Paper view": paper,
    "Attention math": attention_math,
    "Positional encoding": positional,
    "Masks": masks,
    "Attention rollout": rollout,
    "Head statistics": head_statistics,
    "Head ablation": ablation,
    "Logit attribution": attribution,
    "Compare two inputs": compare,
    "Corpus": corpus,
    "Training steps": nothing,
    "Experiment: heads pruned": experiment,
    "Open a trace file": nothing,
}


def test_every_page_has_its_changes_in_the_walk() -> None:
    assert list(CHANGES) == [p.title for p in PAGES]


def test_every_choice_on_every_page_reopens_from_the_link(server, browser) -> None:
    """Walk every page changing its choices, then open the last address in a fresh browser: each page the same."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    shown: dict[str, dict[str, str]] = {}
    changed: dict[str, list[str]] = {}
    try:
        page.goto(f"{server}/?{urlencode(START)}")
        for number, p in enumerate(PAGES):
            if number:
                go(page, p.title)
            before = settle(page)
            TOUCHED.clear()
            CHANGES[p.title](page)
            shown[p.title] = settle(page)
            changed[p.title] = [label for label, value in shown[p.title].items() if before.get(label) != value]
            missed = [label for label in TOUCHED if label not in changed[p.title]]
            assert not missed, f"{p.title}: {missed} show what they showed before: {shown[p.title]}"
        query = urlsplit(page.url).query
    finally:
        context.close()
    fresh = browser.new_context(viewport={"width": 1024, "height": 768})
    again = fresh.new_page()
    again.set_default_timeout(90_000)
    reproduced, differences = 0, {}
    try:
        for p in PAGES:
            again.goto(f"{server}/{p.url_path}?{query}")
            now = settle(again)
            if now == shown[p.title]:
                reproduced += 1
            else:
                differences[p.title] = {k: (v, now.get(k)) for k, v in shown[p.title].items() if now.get(k) != v}
    finally:
        fresh.close()
    print(f"{reproduced} of {len(PAGES)} pages reopened as left; changed: {changed}")
    assert reproduced == len(PAGES), f"walked → reopened: {differences}\nthe address: {query}"


def test_a_text_over_a_thousand_characters_opens_from_its_link(server, browser) -> None:
    text = " ".join(f"The cat number {i} sat on the mat." for i in range(60))
    assert len(text) > PLAIN_LONGEST
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?{urlencode({'model': 'lm-english'})}")
        settle(page)
        area = page.get_by_label("Text", exact=True)
        area.fill(text)
        area.press("Control+Enter")
        page.wait_for_function(f"() => new URLSearchParams(location.search).get('text')?.startsWith('{PACKED}')")
        settle(page)
        link = page.url
    finally:
        context.close()
    fresh = browser.new_context(viewport={"width": 1024, "height": 768})
    page = fresh.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(link)
        page.get_by_label("Text", exact=True).wait_for()  # the sidebar drawn, not its skeleton
        assert settle(page)["Text"] == text
        assert page.get_by_text("The address bar keeps the model, text, layer and head").count() == 1
    finally:
        fresh.close()
    print(f"a text of {len(text):,} characters: a link of {len(link):,}")
