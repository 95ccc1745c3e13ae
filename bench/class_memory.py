"""A class's memory: the server's resident memory while many sessions run the pages that keep the most.

Starts the server as README says (`python -m atlas app`, via bench/classroom.py) and drives it over its websocket
in Streamlit's own protocol, as a browser does (no browser: ninety tabs of chromium would measure chromium):
  detector  N sessions each open Head statistics from a link carrying 20 lines of 100 tokens for the detector
            (`detect_texts=`, packed as the app packs a long text), every line different (no session shares another's
            analyses), all at once;
  circuits  N students with three circuit tabs each, all at once: Logit attribution (computed on opening),
            Compare's activation patching of every head (its button pressed) and Head ablation's exact "Rank every
            head" (its button pressed), each on the student's own sentence.
Printed: the server's peak resident memory in each phase (its whole process group, sampled every 0.1 s; target
≤ 1.5 GB), its memory before and after, how many pages drew their result and how many showed an error, the load.

    python bench/class_memory.py [--sessions 30] [--lines 20] [--model lm-english] [--phase detector|circuits|both]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from urllib.parse import urlencode

import common
import websockets
from browser import stop_server
from classroom import STEP_TIMEOUT_S, Page, RssSampler, collect, everyday_sentences, serve, uptime
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from ui.state import pack_text

TARGET_BYTES = 1.5 * 2**30
# what each page is for: its chart's key, or for the ranking (a table, which has no key) its download button's
WANT = {
    "heads": "detector",
    "attribution": "attribution_heads",
    "compare": "patching",
    "ablation": "ablate_ranking_csv",
}
MIB = 2**20


class Tab:
    """One browser tab: a websocket session on one page of the app, opened from a link."""

    def __init__(self, url: str, page: str, query: dict) -> None:
        self.url, self.page, self.query = url, page, urlencode(query)
        self.buttons, self.ws, self.keys = {}, None, []

    async def open(self) -> Page:
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None, ping_interval=None)
        return await self.rerun()

    async def rerun(self, press: str | None = None) -> Page:
        """Run the page again; `press`: the label of a button to press (its id as the page last drew it)."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_name = self.page  # by its address: every run on this page
        if press is not None:
            widget = state.widget_states.widgets.add()
            widget.id, widget.trigger_value = self.buttons[press], True
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        await self.ws.send(msg.SerializeToString())
        page = Page()
        self.keys = []  # the keys of the charts and widgets this run drew
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(self.ws.recv(), STEP_TIMEOUT_S))
            kind = fwd.WhichOneof("type")
            if kind == "script_finished":
                return page
            if kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                what = element.WhichOneof("type")
                key = getattr(getattr(element, what), "id", "").rsplit("-", 1)[-1]  # a chart's or a widget's key
                if key:
                    self.keys.append(key)
                if what == "button":
                    label = element.button.label
                    self.buttons["Patch" if label.startswith("Patch (") else label] = element.button.id
                collect(page, element)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


async def run_tab(url: str, page: str, query: dict, press: str | None, want: str, done: dict) -> None:
    tab = Tab(url, page, query)
    try:
        shown = await tab.open()
        if press is not None:
            if press not in tab.buttons:
                raise RuntimeError(f"{page}: no button {press!r} ({sorted(tab.buttons)}); errors {shown.errors}")
            shown = await tab.rerun(press)
        if not shown.errors and want not in tab.keys:
            shown.errors.append(f"no {want!r} among what it drew: {tab.keys}")
        done["errors" if shown.errors else "drawn"] += 1
        if shown.errors:
            done.setdefault("first error", f"{page}: {shown.errors[0][:160]}")
    except Exception as exc:  # counted, the others go on
        done["errors"] += 1
        done.setdefault("first error", f"{page}: {type(exc).__name__}: {str(exc)[:160]}")
    finally:
        await tab.close()


async def run_all(jobs: list[tuple[str, dict, str | None]], url: str) -> dict:
    """Every tab at once; each must draw the table or chart its page is for (WANT)."""
    done = {"drawn": 0, "errors": 0}
    await asyncio.gather(*(run_tab(url, page, query, press, WANT[page], done) for page, query, press in jobs))
    return done


def detector_jobs(model: str, sessions: int, lines: int, tokens: int) -> list[tuple[str, dict, str | None]]:
    """Each session's own link: its text and `lines` lines of `tokens` tokens, packed as the app packs a long text."""
    ckpt = common.load_checkpoint(common.DEFAULT_CHECKPOINTS / model)
    jobs = []
    for i in range(sessions):
        own = [common.text_of_tokens(ckpt, tokens, 1000 + i * (lines + 1) + j) for j in range(lines + 1)]
        query = {"model": model, "text": own[0], "detect_texts": pack_text("\n".join(own[1:]))}
        jobs.append(("heads", query, None))
    return jobs


def circuit_jobs(model: str, sessions: int) -> list[tuple[str, dict, str | None]]:
    texts = everyday_sentences(2 * sessions, seed=12)
    jobs = []
    for i in range(sessions):
        first = texts[2 * i]
        second = first.replace(first.split()[1], "dog", 1) if len(first.split()) > 2 else texts[2 * i + 1]
        text = {"model": model, "text": first}
        jobs += [
            ("attribution", text, None),
            ("compare", {**text, "compare": second, "patch": "heads", "patch_method": "exact"}, "Patch"),
            ("ablation", {**text, "rank": "exact"}, "Rank every head"),
        ]
    return jobs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=30)
    p.add_argument("--lines", type=int, default=20)
    p.add_argument("--tokens", type=int, default=100, help="tokens of each detector line")
    p.add_argument("--model", default="lm-english")
    p.add_argument("--phase", choices=("detector", "circuits", "both"), default="both")
    args = p.parse_args(argv)
    ckpt_dir = common.DEFAULT_CHECKPOINTS / args.model
    phases = {
        "detector": detector_jobs(args.model, args.sessions, args.lines, args.tokens),
        "circuits": circuit_jobs(args.model, args.sessions),
    }
    chosen = list(phases) if args.phase == "both" else [args.phase]
    print(f"# Class memory: {args.sessions} sessions, {args.model}; {common.machine_line()}")
    worst = 0
    for name in chosen:
        load_before = uptime()
        proc, url = serve(ckpt_dir, 0)  # a fresh server per phase: each peak is its own
        try:
            with RssSampler(proc.pid) as rss:
                start = rss.now()
                t0 = time.perf_counter()
                done = asyncio.run(run_all(phases[name], url))
                seconds = time.perf_counter() - t0
                end, peak = rss.now(), rss.peak
        finally:
            stop_server(proc)
        worst = max(worst, peak)
        print(
            f"{name}: {len(phases[name])} tabs in {seconds:.0f} s; drawn {done['drawn']}, errors {done['errors']}; "
            f"server RSS start / peak / end {start / MIB:,.0f} / {peak / MIB:,.0f} / {end / MIB:,.0f} MiB "
            f"({common.verdict(peak, TARGET_BYTES)} ≤ {TARGET_BYTES / MIB:,.0f}); load "
            f"{common.load_average(load_before)} → {common.load_average(uptime())}"
        )
        if "first error" in done:
            print(f"  first error: {done['first error']}")
    return 0 if worst <= TARGET_BYTES else 1


if __name__ == "__main__":
    raise SystemExit(main())
