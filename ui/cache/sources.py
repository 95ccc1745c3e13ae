"""What a page reads from, a `Source` (a loaded checkpoint and a text, or an opened trace file in their place), and
what it draws, a `Shown` (the source with its Analysis); opened trace files' Analyses, kept in the byte budget.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

from analysis.imported import TraceError, read_trace
from analysis.record import Analysis
from inference import catalog
from inference.checkpoint import Checkpoint
from inference.memory import BUDGET, MISSING, ByteCache, measured_bytes
from ui.kept import SHARE


@dataclass(frozen=True)
class Source:
    """What a page reads from: a loaded checkpoint and the text to analyse, or an opened trace file in their place
    (attention computed elsewhere, opened on views/trace.py: no weights, so nothing can be run on it). A page asks
    `has_model` what it may do with one, never which of the two it is."""

    name: str  # what the pages name it by (charts' file names): the checkpoint's name, or the file's as uploaded
    text: str  # the text to analyse; a trace file's: the text its attention was computed on
    entry: catalog.Entry | None = None  # the checkpoint; None for a trace file
    ckpt: Checkpoint | None = None
    stamp: float = 0.0  # the checkpoint's modification time (catalog.stamp): a rewritten checkpoint is a new key
    digest: str = ""  # a trace file's sha256: the key of its Analysis in TRACES, shared by sessions opening one file
    reference: str | None = None  # a translator's decoder reads this text (teacher forcing), not its own output

    @classmethod
    def checkpoint(cls, entry: catalog.Entry, ckpt: Checkpoint, stamp: float, text: str) -> Source:
        """The chosen, loaded checkpoint and the text to analyse."""
        return cls(entry.name, text, entry, ckpt, stamp)

    @classmethod
    def trace(cls, name: str, digest: str, text: str) -> Source:
        """An opened trace file (open_trace), named `name`, its bytes' sha256 `digest`."""
        return cls(name, text, digest=digest)

    @property
    def has_model(self) -> bool:
        """Whether a model stands behind it, to run on another text, ablate or probe: a checkpoint's, not a trace
        file's."""
        return self.ckpt is not None

    @property
    def path(self) -> str:
        """The checkpoint's folder ("" for a trace file)."""
        return str(self.entry.path) if self.entry is not None else ""

    @property
    def key(self) -> tuple:
        """What names this source in a cache (ui.kept): a checkpoint's path, modification time, text and reference;
        a trace file's bytes, not its name."""
        return (self.path, self.stamp, self.text, self.reference) if self.has_model else ("trace", self.digest)

    def with_text(self, text: str) -> Source:
        """The same checkpoint with another text (and no analysis)."""
        if not self.has_model:
            raise ValueError(f"the trace file {self.name} holds one text's attention: there is no model to run")
        return Source(self.name, text, self.entry, self.ckpt, self.stamp)

    def with_reference(self, reference: str | None) -> Source:
        """The same checkpoint and text, its decoder fed `reference` (teacher forcing) instead of its own output."""
        if not self.has_model:
            raise ValueError(f"the trace file {self.name} holds one text's attention: there is no model to run")
        return Source(self.name, self.text, self.entry, self.ckpt, self.stamp, reference=reference)

    def with_analysis(self, analysis: Analysis) -> Shown:
        """This source with its Analysis: what a page draws."""
        fields = (self.name, self.text, self.entry, self.ckpt, self.stamp, self.digest, self.reference)
        return Shown(*fields, analysis=analysis)


@dataclass(frozen=True)
class Shown(Source):
    """A source with its Analysis, looked up once per rerun (`analysed`): what a page draws. The page hands it to every
    widget and chart, which read `analysis` instead of looking it up again."""

    analysis: Analysis = field(kw_only=True)

    @property
    def source(self) -> Source:
        """This without its Analysis: what a session may keep (a button's argument, a fragment's: see `held`)
        without pinning the analysis out of the byte budget's reach."""
        return Source(self.name, self.text, self.entry, self.ckpt, self.stamp, self.digest, self.reference)


class TraceGoneError(LookupError):
    """The server let an opened trace's Analysis go (the byte budget needed room): it must be opened again."""


# Opened traces' Analyses by sha256, in the server's byte budget like everything else kept: a session holds only the
# file's name, text and hash (a Source), so a class opening traces cannot take more than this store's share; the least
# recently drawn goes first, and its session is told to open it again.
TRACES = ByteCache(SHARE)
# Trace files are parsed one at a time, server-wide: ten opened at once cost one parse's memory, not ten.
READING = threading.Lock()


def open_trace(data: bytes, name: str) -> Source:
    """Read a trace file's bytes (analysis.imported.read_trace) once per content, keep its Analysis in TRACES and
    return the Source naming it; raises TraceError, also for a trace larger than the store may keep."""
    digest = hashlib.sha256(data).hexdigest()

    def read() -> Analysis:
        with READING:  # one file parsed at a time, each within what the store may keep: measured before parsing
            return read_trace(data, name, max_bytes=min(TRACES.max_bytes, BUDGET.owner_room()))

    analysis = TRACES.get_or_compute(digest, read)
    if TRACES.get(digest, MISSING) is MISSING:
        size, room = measured_bytes(analysis), min(TRACES.max_bytes, BUDGET.owner_room())
        raise TraceError(
            f"{name}: its attention takes {size / 2**20:,.0f} MB in memory, more than this server keeps for a trace "
            f"({room / 2**20:,.0f} MB now): export a shorter text, or fewer layers"
        )
    return Source.trace(name, digest, analysis.text)
