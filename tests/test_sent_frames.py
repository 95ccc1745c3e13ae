"""tests/browser_support.SentFrames tells a press of a button from a rerun that only carries the button's neighbours:
every rerun the browser sends holds every widget's state, so the teacher's Ask (key "class_ask") must not be found
in the frames of the expander around it (key "class_ask_panel") or of the radio picked before it. click_sent clicks
again only when no press left the browser. Frames are built with Streamlit's own protobufs; no browser is started."""

from __future__ import annotations

from browser_support import SentFrames, click_sent
from streamlit.proto.BackMsg_pb2 import BackMsg

PREFIX = "$$ID-0123456789abcdef0123456789abcdef-"


def rerun(pressed: str | None = None, **others: bool) -> bytes:
    """A rerun's back message: the expanders and radios of `others` with their values, and `pressed` as a button
    whose trigger is set."""
    message = BackMsg()
    widgets = message.rerun_script.widget_states.widgets
    for key, value in others.items():
        widget = widgets.add()
        widget.id, widget.bool_value = PREFIX + key, value
    if pressed is not None:
        widget = widgets.add()
        widget.id, widget.trigger_value = PREFIX + pressed, True
    return message.SerializeToString()


class Page:
    """Records the websocket listener SentFrames adds; each click sends the frames of `clicks` in turn."""

    def __init__(self, *clicks: list[bytes]) -> None:
        self.clicks, self.clicked = list(clicks), 0
        self.sent = SentFrames(self)

    def on(self, event: str, listener) -> None:
        assert event == "websocket"
        self.socket = listener

    def wait_for_function(self, script: str) -> None:
        pass

    def wait_for_timeout(self, ms: int) -> None:
        pass

    def click(self) -> None:
        self.clicked += 1
        for frame in self.clicks.pop(0):
            self.sent._add(frame)


def test_a_press_is_counted_and_its_neighbours_keys_are_not() -> None:
    page = Page()
    page.sent._add(rerun(class_ask_panel=True, class_kind=True))  # the radio's rerun, inside the open expander
    page.sent._add(rerun(class_ask_panel=True))
    assert page.sent.count("class_ask") == 0
    page.sent._add(rerun("class_ask", class_ask_panel=True))
    assert page.sent.count("class_ask") == 1 and page.sent.count("class_ask_panel") == 0


def test_a_frame_that_is_no_rerun_or_no_message_is_no_press() -> None:
    page = Page()
    heartbeat = BackMsg()
    heartbeat.app_heartbeat = True
    page.sent._add(heartbeat.SerializeToString())
    page.sent._add(b"\xff\xff\xff not a protobuf")
    page.sent._add("$$ID-x-class_ask")
    assert page.sent.count("class_ask") == 0


def test_a_lost_click_beside_a_neighbours_rerun_is_clicked_again() -> None:
    page = Page([rerun(class_ask_panel=True)], [rerun("class_ask", class_ask_panel=True)])
    click_sent(page, page, page.sent, "class_ask", wait_ms=200)
    assert page.clicked == 2 and page.sent.count("class_ask") == 1
