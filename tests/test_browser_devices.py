"""One answer a device in a real browser (`atlas app`, headless chromium): the server sets the device cookie on the
page, so a student who answered and opens the link again in a new tab of the same browser is the same device, sees
their answer and cannot answer again; the teacher's panel counts one device."""

from __future__ import annotations

import re

import pytest
from browser_support import SentFrames, click_sent, settle
from test_browser_class import param

pytestmark = pytest.mark.browser


def test_a_second_tab_of_one_browser_is_the_same_device_and_answers_no_more(server, browser) -> None:
    teacher_context, phone_context = browser.new_context(), browser.new_context()
    teacher, phone = teacher_context.new_page(), phone_context.new_page()
    for pg in (teacher, phone):
        pg.set_default_timeout(120_000)
    sent = SentFrames(teacher)
    try:
        teacher.goto(f"{server}/?model=lm-english")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class", exact=True).click()
        teacher.wait_for_url(re.compile(r"teach="))
        code = param(teacher, "class")
        phone.goto(f"{server}/?class={code}")
        phone.get_by_text("following the teacher").wait_for()
        cookie = next(c for c in phone_context.cookies() if c["name"] == "atlas_device")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"

        teacher.get_by_text("Ask the class").click()
        click_sent(teacher, teacher.get_by_role("button", name="Ask", exact=True), sent, "class_ask")
        teacher.get_by_text("0 answers so far").wait_for()
        question = phone.locator('[data-testid="stRadio"]').filter(has_text="Question 1")
        question.locator("label").nth(1).click()
        phone.get_by_role("button", name="Answer").click()
        phone.get_by_text("Your answer").wait_for()

        second_tab = phone_context.new_page()
        second_tab.set_default_timeout(120_000)
        second_tab.goto(f"{server}/?class={code}")
        second_tab.get_by_text("Your answer").wait_for()  # the same device: its answer, no Answer button
        assert second_tab.get_by_role("button", name="Answer").count() == 0
        teacher.get_by_text("1 answer so far").wait_for()
        teacher.get_by_text(re.compile("Class .*how students join")).click()
        teacher.get_by_text(re.compile(r"1\s+device has joined")).wait_for()
    finally:
        teacher_context.close()
        phone_context.close()
