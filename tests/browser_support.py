"""What the browser tests share: a streamlit server started as the README starts it, and Debian's chromium.

The fixtures themselves (`server`, `published_server`, `browser`, `page`) are in tests/conftest.py: each pytest-xdist
worker starts one server of each kind, whichever browser modules it runs (session-scoped), and one chromium a module.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from streamlit.proto.BackMsg_pb2 import BackMsg
from tied import tied

ROOT = Path(__file__).resolve().parent.parent
# Debian's chromium-headless-shell (the same Blink, without the full browser's windowing and GPU process) spends
# less machine CPU on a page visit than /usr/bin/chromium (bench/test_browsers.py), and the browser tests are most of
# CI's time. ATLAS_TEST_CHROMIUM names another; the full chromium serves where the shell is absent.
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
CHROMIUM = os.environ.get("ATLAS_TEST_CHROMIUM") or (
    HEADLESS_SHELL if Path(HEADLESS_SHELL).exists() else "/usr/bin/chromium"
)
SHOTS = ROOT / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_suffix() -> str:
    """ "-gw0" under pytest-xdist's first worker, "" without xdist: two workers never write one log."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"-{worker}" if worker else ""


def serve(extra_env: dict[str, str] | None = None, log_name: str = "server") -> Iterator[str]:
    """A streamlit server on a free loopback port, on the shipped checkpoints (and `extra_env`); its url, until the
    generator is closed. Its output goes to screenshots/`log_name`[-worker].log."""
    port = free_port()
    # The browser modules of one worker share this server, and five of them start classes from the loopback: the
    # per-address bound (tests/test_edges.py takes it to its edge) would refuse the fourth.
    env = {
        **os.environ,
        "ATLAS_CHECKPOINTS": str(ROOT / "checkpoints"),
        "OMP_NUM_THREADS": "1",
        "ATLAS_CLASSES_PER_ADDRESS": "20",
        **(extra_env or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        "atlas",
        "app",  # the README's command: `streamlit run app.py`, its first page run before it listens
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",  # files edited while the tests run must not put "File change. Rerun" on pages
        "none",
    ]
    SHOTS.mkdir(exist_ok=True)
    log_file = f"{log_name}{worker_suffix()}.log"
    log = open(SHOTS / log_file, "w")  # closed in the finally below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=tied())
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"streamlit exited with {proc.returncode}; see screenshots/{log_file}")
                time.sleep(0.5)
        else:
            pytest.fail(f"streamlit did not answer /_stcore/health within 90 s; see screenshots/{log_file}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def launch_chromium(playwright):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `bash scripts/test.sh` installs Debian's chromium-headless-shell")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


AXE = Path(os.environ.get("ATLAS_AXE", ROOT / ".venv" / "axe-core" / "axe.min.js"))  # scripts/fetch_axe.py
# A page has settled: no "Running…" status, nothing faded as stale, and its title drawn.
SETTLED = """() => !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-stale="true"]')
    && document.querySelector('[data-testid="stMainBlockContainer"] h1') !== null"""
# The order Tab walks: focusable, shown elements in document order (no positive tabindex on these pages).
TAB_ORDER = """() => [...document.querySelectorAll(
    'a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), textarea, select, [tabindex]')]
    .filter(e => e.tabIndex >= 0 && e.getClientRects().length > 0)
    .map(e => e.getAttribute('aria-label') || e.innerText.trim().split('\\n')[0])"""
AXE_LOADED = "() => typeof window.axe === 'object'"  # axe-core is in the page (injected before it was left)
# axe-core's serious and critical violations, and headings out of order (a moderate one).
RUN_AXE = """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
    .filter(v => v.impact === "serious" || v.impact === "critical" || v.id === "heading-order")
    .map(v => `${v.id} (${v.impact}): ${v.help}: ` + v.nodes.slice(0, 3).map(n => n.html.slice(0, 120)).join(" | "))"""
# Elements that clip their own text: a box narrower or shorter than the text it holds, with its overflow hidden or
# an ellipsis.
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

# Text drawn under the element that follows it: in a column of the page's elements, an element whose text runs below
# the top of what the next one draws (its text, a chart, a table, a widget's box), as when a heading's negative
# margin outlasts a narrowed gap between elements and the chart below, with its white background, covers the
# heading's bottom. An element's empty margin may overlap its neighbour: nothing is covered there.
OVERLAPPED = """() => {
  const out = [];
  const texts = e => {
    const rects = [];
    const walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      // an icon's name is drawn as one glyph of its font (a ligature), not as the text it measures
      if (!n.textContent.trim() || n.parentElement.closest('[data-testid="stIconMaterial"]')) continue;
      if (!n.parentElement.checkVisibility({visibilityProperty: true})) continue;  // a folded expander's, hidden
      let clip = Infinity;  // text a box of its own hides is not drawn
      for (let a = n.parentElement; a && a !== e.parentElement; a = a.parentElement)
        if (getComputedStyle(a).overflowY !== 'visible') clip = Math.min(clip, a.getBoundingClientRect().bottom);
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects())
        if (r.width > 0 && r.height > 0 && r.top < clip) rects.push({top: r.top, bottom: Math.min(r.bottom, clip)});
    }
    return rects;
  };
  const PAINTED = 'svg.main-svg, canvas, img, input, textarea, button, [data-baseweb="select"]';
  const drawnTop = e => Math.min(...texts(e).map(r => r.top),
    ...[...e.querySelectorAll(PAINTED)].filter(p => p.checkVisibility()).map(p => p.getBoundingClientRect().top));
  for (const block of document.querySelectorAll('[data-testid="stMain"] [data-testid="stVerticalBlock"]')) {
    const items = [...block.children].filter(e => e.getBoundingClientRect().height > 0);
    for (let i = 0; i + 1 < items.length; i++) {
      const bottom = Math.max(...texts(items[i]).map(r => r.bottom)), top = drawnTop(items[i + 1]);
      if (bottom > top + 1)
        out.push(`"${items[i].innerText.trim().slice(0, 40)}": its text ends at y = ${bottom.toFixed(0)}, under what `
                 + `the next element (${items[i + 1].getAttribute('data-testid')}) draws from y = ${top.toFixed(0)}`);
    }
  }
  return out; }"""


# A page holds still: no "Running…" status, nothing stale, no skeleton, and what it shows (its elements, its charts
# and their drawn plots, the length of its text) unchanged for `quiet` ms since this wait (`token`) began. A rerun
# the first run starts (a fragment, a widget set on mount) puts up the status widget at once, so a page that holds
# still this long has settled, however long the machine took to get there.
HOLDS_STILL = """([token, quiet]) => {
  const idle = !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-stale="true"]') && !document.querySelector('[data-testid="stSkeleton"]');
  const shown = idle && [document.querySelectorAll('[data-testid="stElementContainer"]').length,
    document.querySelectorAll('.stPlotlyChart').length, document.querySelectorAll('.main-svg').length,
    document.body.innerText.length].join();
  const now = performance.now(), last = window.__atlasStill;
  if (!idle || !last || last.token !== token || last.shown !== shown) {
    window.__atlasStill = {token, shown, since: now};
    return false;
  }
  return now - last.since >= quiet;
}"""
QUIET_MS = 600
_waits = itertools.count()


def hold_still(page, quiet_ms: int = QUIET_MS) -> None:
    """Wait until `page` shows the same thing, idle, for `quiet_ms` (HOLDS_STILL), polled every 100 ms."""
    page.wait_for_function(HOLDS_STILL, arg=[f"{os.getpid()}-{next(_waits)}", quiet_ms], polling=100)


def settle(page) -> None:
    """Wait until `page` has settled (SETTLED: its title drawn) and then holds still: a rerun its first run started
    (fragments, charts) settles too."""
    page.wait_for_function(SETTLED)
    hold_still(page)
    page.wait_for_function(SETTLED)


def settled_violations(page, settled: bool = False) -> list[str]:
    """axe-core's serious and critical violations (and heading order) on `page`, from one run once it has settled
    (`settled`: the caller has waited for SETTLED already) and holds still: faded stale text fails contrast and a
    sidebar being redrawn holds a scrollable region without its links, so axe reads only a page at rest, and what
    it finds there is returned, never looked at again until it goes away."""
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: `bash scripts/test.sh` fetches axe-core from npm")
    if not page.evaluate(AXE_LOADED):  # a page reached from the menu has it already
        page.add_script_tag(path=str(AXE))
    if settled:
        hold_still(page)
    else:
        settle(page)
    return page.evaluate(RUN_AXE)


# Click the first link to the page at `path` ("" for Explore) in the open page, the menu's first: returns whether one
# was found. Streamlit's page links are handled by its own click handler, so the app's JavaScript stays loaded.
FOLLOW_LINK = """(path) => {
  const want = ('/' + path).replace(/\\/$/, '');
  const at = a => new URL(a.href, location.href).pathname.replace(/\\/$/, '') === want;
  const links = [...document.querySelectorAll('[data-testid="stTopNav"] a[href], [data-testid="stSidebarNav"] a[href]')]
    .concat([...document.querySelectorAll('a[href]')]).filter(at);
  if (links.length) links[0].click();
  return links.length > 0;
}"""
MAIN_TEXT = """() => document.querySelector('[data-testid="stMain"]')?.innerText"""  # what the page's main area reads
# The page at `path` has replaced the one whose main text was `before`.
ARRIVED = """([path, before]) => location.pathname.replace(/\\/$/, '') === ('/' + path).replace(/\\/$/, '')
  && document.querySelector('[data-testid="stMain"]')?.innerText !== before"""


def at_path(page) -> str:
    """The app page `page` shows, as ui.pages names it ("" for Explore)."""
    return page.evaluate("() => location.pathname").strip("/")


def open_from_menu(page, path: str) -> None:
    """Go to the page at `path` ("" for Explore) from `page`, an app page already settled, as a person does from the
    menu: the link clicked, the same session going on (its choices kept, the app's JavaScript loaded once), and wait
    until the new page has settled. Under a third of a fresh visit's CPU (bench/page_visit.py --from-menu)."""
    if at_path(page) == path:
        return
    before = page.evaluate(MAIN_TEXT)
    if not page.evaluate(FOLLOW_LINK, path):
        raise AssertionError(f"{page.url}: no link to /{path} on the page")
    page.wait_for_function(ARRIVED, arg=[path, before])
    settle(page)


def page_in_tab(
    tabs: dict,
    key: object,
    browser,
    address: str,
    go,
    width: int,
    height: int,
    phone: bool = False,
    timeout_ms: int = 90_000,
):
    """The page of tab `key` in `tabs` (a test module's open tabs, the `tabs` fixture), settled: a new tab, at
    `width`×`height` (a phone: mobile and touch), opens `address` afresh; an open one is taken there by `go(tab)`
    (`open_from_menu`, a Lesson's Next), as a person goes on in one session. A tab whose page did not come is closed
    and dropped, so the next visit opens afresh. `timeout_ms`: the tab's default wait (a published model's first
    load takes longer)."""
    tab = tabs.get(key)
    try:
        if tab is None:
            context = browser.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone)
            tab = tabs[key] = context.new_page()
            tab.set_default_timeout(timeout_ms)
            tab.goto(address)
            settle(tab)
        else:
            go(tab)
    except BaseException:
        tabs.pop(key, None)
        if tab is not None:
            tab.context.close()
        raise
    return tab


# No expander is opening or closing: Streamlit animates a details element's height with its content clipped.
EXPANDERS_STILL = """() => [...document.querySelectorAll('[data-testid="stExpander"] details')]
  .every(d => d.getAnimations().length === 0)"""


class SentFrames:
    """What a page sent its server over the websocket (Streamlit's back messages), recorded from before it opens:
    tells a click the browser never sent from one the server received."""

    def __init__(self, page) -> None:
        self.presses: Counter[str] = Counter()  # widget key → reruns sent with that button pressed
        page.on("websocket", lambda ws: ws.on("framesent", self._add))

    def _add(self, payload: bytes | str) -> None:
        self.presses.update(pressed(payload if isinstance(payload, bytes) else payload.encode()))

    def count(self, key: str) -> int:
        """How many reruns the page asked for with the button whose widget key is `key` pressed. Each rerun carries
        every widget's state, so a key found anywhere in a frame is no press: an expander keyed "class_ask_panel"
        sits in every frame beside an Ask button keyed "class_ask"."""
        return self.presses[key]


def pressed(frame: bytes) -> set[str]:
    """The keys of the buttons a back message asks a rerun with pressed: widgets whose id is Streamlit's
    `$$ID-<hash>-<key>` holding trigger_value true (none for a message that is no rerun)."""
    message = BackMsg()
    try:
        message.ParseFromString(frame)
    except DecodeError:
        return set()
    if message.WhichOneof("type") != "rerun_script":
        return set()
    return {
        w.id.split("-", 2)[2]
        for w in message.rerun_script.widget_states.widgets
        if w.id.count("-") >= 2 and w.WhichOneof("value") == "trigger_value" and w.trigger_value
    }


def click_sent(page, button, sent: SentFrames, marker: str, tries: int = 3, wait_ms: int = 5000) -> None:
    """Click `button` once the page's expanders hold still, and wait until the browser has sent the rerun that
    carries `marker` (the widget's key). A click the browser lost, with nothing sent, is clicked again, up to `tries`
    times: beside two busy loops a click in an expander just opened can be lost with no message leaving the
    browser. A click that was sent is never repeated, so what the server does with it is still tested."""
    page.wait_for_function(EXPANDERS_STILL)
    before = sent.count(marker)
    for _ in range(tries):
        button.click()
        for _ in range(wait_ms // 100):
            page.wait_for_timeout(100)  # the page's events reach `sent` while Playwright waits
            if sent.count(marker) > before:
                return
    raise AssertionError(f"{tries} clicks on {button} and the browser sent no rerun with {marker!r}")
