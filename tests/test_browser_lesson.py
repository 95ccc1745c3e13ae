"""The Lesson in a real browser (`streamlit run app.py` on the shipped checkpoints, headless chromium): a student
walks every step with the Next button, switching the model where a step needs another kind; every step draws
without an error and puts its slug in the address bar. The induction step draws the induction model's head and
links to the snapshot where it forms. The embedding, feed-forward and residual steps draw the two published models
too (SmolLM2, MiniLM, with ATLAS_PRETRAINED=1; skipped unless installed). Screenshots of every step at 1024×768 and
1600 wide go to screenshots/lesson-*.png (git-ignored)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from test_browser import SHOTS, drawn_without_error

from course.lesson import SLUGS, STEPS
from inference.pretrained.packages import MINILM, SMOLLM2

pytestmark = pytest.mark.browser
VIEW = "[data-testid='stMain'] .stPlotlyChart, [data-testid='stMain'] [data-testid='stDataFrame']"  # not the sidebar
# The live view's top just below Streamlit's header bar (about 60 px), in the container that scrolls.
SCROLL = """e => {
  e.scrollIntoView({block: 'start'});
  let p = e.parentElement;
  while (p && p.scrollHeight <= p.clientHeight) p = p.parentElement;
  if (p) p.scrollBy(0, -80);
}"""
SIZES = {"1024x768": (1024, 768), "1600": (1600, 1000)}
# The steps lm-english lacks, drawn on another model: it has no cross-attention (its positions are the paper's
# sinusoids, so the positional-encoding step draws lm-english itself).
SWITCH = {"cross-attention": "translate-en-de"}
ASKED = {"multi-head", "next-token", "induction-heads"}  # the steps that ask lm-english's lesson a question first


def shoot(page, name: str, width: int, height: int) -> None:
    """At 768 px high, the window as a student sees it once scrolled to the step's live view; at 1600 wide, the
    whole step (the window made as tall as the page: Streamlit scrolls its own container, not the document)."""
    if height <= 768:
        view = page.locator(VIEW).first
        view.evaluate(SCROLL)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / name))
        return
    tall = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": width, "height": max(height, tall)})
    page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / name))
    page.set_viewport_size({"width": width, "height": height})


def heading(page, index: int):
    return page.get_by_role("heading", name=f"{index + 1}. {STEPS[index].title}", exact=True)


@pytest.mark.parametrize("size", list(SIZES))
def test_a_student_walks_every_step_of_the_lesson(server, browser, size: str) -> None:
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{server}/lesson?model=lm-english&lesson=embeddings")
        for index, slug in enumerate(SLUGS):
            heading(page, index).wait_for()
            page.get_by_text(f"Step {index + 1} of {len(STEPS)}: {STEPS[index].title}", exact=True).wait_for()
            if slug in SWITCH:  # shown on the model it is about, loaded for this step; the app keeps lm-english
                page.get_by_text(f"Shown here on {SWITCH[slug]}, loaded for this step").wait_for()
                page.get_by_role("button", name=f"Switch the app to {SWITCH[slug]}").wait_for()
            # app.py writes the URL when the page's script ends: then nothing on the page is left from the last step
            page.wait_for_function("s => location.search.includes(s)", arg=f"lesson={slug}")
            page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')")
            if slug in ASKED:  # the step asks first (views/lesson_steps/quiz.py); its figure shows once skipped
                page.get_by_role("button", name="Show without answering").click()
                page.get_by_text("You did not answer.", exact=False).wait_for()
            page.locator(VIEW).first.wait_for()
            drawn_without_error(page)
            shoot(page, f"lesson-{index + 1:02d}-{slug}-{size}.png", width, height)
            if index + 1 < len(SLUGS):
                page.get_by_role("button", name="Next →").first.click()
        assert page.get_by_role("button", name="Next →").first.is_disabled()
        assert "model=lm-english" in page.url
    finally:
        context.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_the_induction_step_draws_the_head_and_links_to_where_it_forms(server, browser, size: str) -> None:
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/lesson?model=induction&lesson=induction-heads")
        heading(page, SLUGS.index("induction-heads")).wait_for()
        page.get_by_role("button", name="Show without answering").click()  # the step asks first
        page.get_by_text("The induction head of induction: layer 2, head 1").wait_for()
        page.locator(".stPlotlyChart", has_text="in training").first.wait_for()  # the last chart: the snapshots
        page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')")
        drawn_without_error(page)
        assert page.locator(".stPlotlyChart").count() == 4  # the head on the run, on a sentence; curve; training
        shoot(page, f"lesson-induction-{size}.png", width, height)
        link = page.get_by_role("link", name="Every snapshot of the run, on your own text: the Training steps page")
        href = link.get_attribute("href")
        assert href.endswith("step=1100"), href  # the first snapshot after the score passed half its last value
        page.goto(f"{server}/{href.lstrip('/')}")
        page.get_by_role("heading", name="Learning to copy from the context").wait_for()
        slider = page.locator("[data-testid='stSlider']", has_text="Training step")
        assert slider.get_by_role("slider").get_attribute("aria-valuetext") == "1,100"
        drawn_without_error(page)
    finally:
        context.close()


def test_a_step_on_the_projector(server, browser) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{server}/lesson?model=translate-en-de&lesson=cross-attention&projector=1")
        heading(page, SLUGS.index("cross-attention")).wait_for()
        page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')")
        page.locator(VIEW).first.wait_for()
        drawn_without_error(page)
        shoot(page, "lesson-projector-1024x768.png", 1024, 768)
    finally:
        context.close()


LAYER_STEPS = {"embeddings": "Token embeddings", "feed-forward": "feed-forward units", "residual-layernorm": "stream"}


@pytest.mark.parametrize("model", [SMOLLM2.name, MINILM.name])
def test_the_layer_steps_draw_the_published_models(published_server, browser, model: str) -> None:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(180_000)  # SmolLM2's first load: its 135 M weights dequantised on a loaded core
    try:
        for slug, title in LAYER_STEPS.items():
            page.goto(f"{published_server}/lesson?model={quote(model)}&lesson={slug}")
            heading(page, SLUGS.index(slug)).wait_for()
            page.get_by_text(f"Needs any model: {model} is one.").wait_for()
            page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')")
            page.locator(".stPlotlyChart", has_text=title).first.wait_for()
            drawn_without_error(page)
            assert not page.get_by_text("This step needs").count(), f"{slug} refused {model}"
            shoot(page, f"lesson-{model}-{slug}.png", 1600, 1000)
    finally:
        context.close()
