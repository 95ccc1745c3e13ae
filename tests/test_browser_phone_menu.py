"""The page menu on a 390 × 844 phone (touch, no hover), where Streamlit folds its top menu into the sidebar: opened,
the menu passes axe-core with nothing left out (no serious or critical violation), lists every page of ui/pages.py
under its section's heading and marks the page shown, and another page opens from it by Tab and Enter and by a
tap. At each width one menu is shown, never two: below 768 px ours (ui/phone_menu.py), from 768 px up Streamlit's
top menu. Screenshots go to screenshots/phone-menu-*.png (git-ignored)."""

from __future__ import annotations

import pytest
from browser_support import settle, settled_violations
from test_browser import SHOTS
from test_browser_class_axe import from_the_top, tab_to

from ui.pages import PAGES

pytestmark = pytest.mark.browser
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
MENU = ".st-key-phone_menu"
# The page links shown (not display: none), of each menu there is: ours, Streamlit's folded one and its top one.
SHOWN_LINKS = """() => Object.fromEntries([
    ['ours', '.st-key-phone_menu a'], ['folded', '[data-testid="stSidebarNav"] a'],
    ['top', '[data-testid="stTopNav"] a']
  ].map(([name, links]) => [name, [...document.querySelectorAll(links)].filter(a => a.checkVisibility()).length]))"""


def open_sidebar(page) -> None:
    """Open the collapsed sidebar with its button, and wait until it has slid into place."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    page.locator('[data-testid="stExpandSidebarButton"]').click()
    page.wait_for_function(
        """() => { const s = document.querySelector('[data-testid="stSidebar"]');
                   return s.dataset.collapsed === 'false' && s.getAnimations({subtree: true}).length === 0
                     && s.getBoundingClientRect().left >= 0; }"""
    )
    sidebar.locator(MENU).or_(sidebar.locator('[data-testid="stSidebarUserContent"]')).first.wait_for()


def marked(page) -> list[str]:
    """The titles of our menu's links drawn as the page shown (Streamlit's page link gives it a background)."""
    return page.locator(f"{MENU} a").evaluate_all(
        "links => links.filter(a => getComputedStyle(a).backgroundColor !== 'rgba(0, 0, 0, 0)').map(a => a.innerText)"
    )


def test_the_phone_menu_passes_axe_lists_every_page_and_opens_one_by_keyboard_and_touch(server, browser) -> None:
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?model=lm-english")
        settle(page)
        page.screenshot(path=str(SHOTS / "phone-menu-closed.png"))
        open_sidebar(page)
        menu = page.locator(MENU)
        assert page.evaluate(SHOWN_LINKS) == {"ours": len(PAGES), "folded": 0, "top": 0}
        page.screenshot(path=str(SHOTS / "phone-menu-open.png"))

        violations = settled_violations(page)  # nothing left out: the opened menu is read with the rest
        assert violations == [], "\n".join(violations)

        # every page once, in ui/pages.py's order, each under its section's heading, each link to its own address
        assert menu.locator("a").all_inner_texts() == [p.title for p in PAGES]
        sections = [s for s in dict.fromkeys(p.section for p in PAGES) if s]
        assert menu.get_by_role("heading").all_inner_texts() == sections
        for p in PAGES:
            link = menu.get_by_role("link", name=p.title, exact=True)
            assert link.evaluate("a => new URL(a.href).pathname") == f"/{p.url_path}", p.title
            if p.section:  # the last heading above the link is its section's
                above = link.evaluate(
                    """a => { const hs = [...document.querySelectorAll('.st-key-phone_menu h2')]
                              .filter(h => h.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING);
                              return hs.length ? hs[hs.length - 1].innerText : ''; }"""
                )
                assert above == p.section, (p.title, above)
        assert marked(page) == ["Explore"]

        # From the keyboard alone: Tab to a page of another section, Enter opens it
        from_the_top(page)
        tab_to(page, menu.get_by_role("link", name="Masks", exact=True))
        page.keyboard.press("Enter")
        page.wait_for_function("() => location.pathname === '/masks'")
        settle(page)
        assert page.locator('[data-testid="stMain"] h1').first.inner_text().startswith("Masks")
        assert marked(page) == ["Masks"]

        # By touch: a tap on a link opens its page (the sidebar stays open: Streamlit lets no page close it)
        menu.get_by_role("link", name="Open a trace file", exact=True).tap()
        page.wait_for_function("() => location.pathname === '/trace'")
        settle(page)
        assert marked(page) == ["Open a trace file"]
    finally:
        context.close()


@pytest.mark.parametrize(("width", "shown"), [(767, "ours"), (768, "top"), (1024, "top"), (1600, "top")])
def test_each_width_shows_one_menu(server, browser, width: int, shown: str) -> None:
    """767 px: the last width Streamlit folds its menu at; 768 px, the first it draws at the top."""
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?model=lm-english")
        settle(page)
        if page.locator('[data-testid="stSidebar"]').get_attribute("data-collapsed") == "true":
            open_sidebar(page)
        page.get_by_role("heading", name="Attention Atlas").wait_for()
        page.screenshot(path=str(SHOTS / f"phone-menu-{width}.png"))
        links = page.evaluate(SHOWN_LINKS)
        assert links["folded"] == 0, links
        assert [name for name, count in links.items() if count] == [shown], links
    finally:
        context.close()
