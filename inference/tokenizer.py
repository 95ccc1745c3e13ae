"""A thin wrapper over sentencepiece: ids, pieces and text, with the special ids the model relies on."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

import sentencepiece as spm

from inference.jsonfile import JsonFileError, read_regular


class TokenizerLike(Protocol):
    """What the model's users need of a tokenizer: ours (sentencepiece) and published models' (pretrained)."""

    sha256: str
    vocab_size: int
    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int
    never_written: frozenset[int]
    not_text: frozenset[int]

    def encode(self, text: str) -> list[int]: ...

    def pieces(self, ids: list[int]) -> list[str]: ...

    def decode(self, ids: list[int]) -> str: ...


MAX_TOKENIZER_BYTES = 16 * 2**20  # a sentencepiece model of 32,000 pieces takes under 1 MB


class TokenizerError(ValueError):
    """The tokenizer file is missing, unreadable or lacks the special pieces the model needs."""


def _model_type(model_bytes: bytes) -> str:
    """The sentencepiece model's type as its trainer recorded it (UNIGRAM, BPE, WORD, CHAR), "" if unreadable."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as model_pb2  # needs protobuf, which streamlit brings

        proto = model_pb2.ModelProto()
        proto.ParseFromString(model_bytes)
        return model_pb2.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type)
    except Exception:  # protobuf missing or a model it cannot parse: the type is unknown
        return ""


class Tokenizer:
    """Sentencepiece model with pad/unk/bos/eos ids. Built from the model file's bytes, so its hash is known."""

    def __init__(self, model_bytes: bytes, source: str = "<bytes>") -> None:
        self.source = source
        self.sha256 = hashlib.sha256(model_bytes).hexdigest()
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(model_bytes)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError with a terse text
            raise TokenizerError(f"{source}: not a sentencepiece model ({exc})") from exc
        for name in ("pad_id", "unk_id", "bos_id", "eos_id"):
            if getattr(self, name) < 0:
                raise TokenizerError(f"{source}: the tokenizer has no {name.removesuffix('_id')} piece")
        self.whole_words = _model_type(model_bytes) == "WORD"  # one piece per word: an unknown word is <unk>

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        path = Path(path)
        try:
            data = read_regular(path, MAX_TOKENIZER_BYTES)
        except JsonFileError as exc:
            raise TokenizerError(str(exc).replace("file not found", "tokenizer file not found")) from exc
        return cls(data, str(path))

    @property
    def vocab_size(self) -> int:
        return self._sp.GetPieceSize()

    @property
    def pad_id(self) -> int:
        return self._sp.pad_id()

    @property
    def unk_id(self) -> int:
        return self._sp.unk_id()

    @property
    def bos_id(self) -> int:
        return self._sp.bos_id()

    @property
    def eos_id(self) -> int:
        return self._sp.eos_id()

    @property
    def never_written(self) -> frozenset[int]:
        """Special ids a model is never asked to write, so never offered as its predictions: padding and the start
        of text (given, never a target of the text the app reads), and `<unk>` when the pieces fall back to bytes
        (every text then encodes without it). The end of text is written: it is never among them."""
        ids = {self.pad_id, self.bos_id}
        byte = self._sp.PieceToId("<0x00>")
        if byte != self.unk_id and self._sp.IsByte(byte):
            ids.add(self.unk_id)
        return frozenset(ids - {self.eos_id})

    @property
    def not_text(self) -> frozenset[int]:
        """Ids no text is made of: padding and the start of text (the end of text is written)."""
        return frozenset({self.pad_id, self.bos_id} - {self.eos_id})

    def encode(self, text: str) -> list[int]:
        """Text → ids, without bos/eos (callers add what their model expects). A whole-word tokenizer encodes each
        word alone: sentencepiece would read two unknown words side by side as one `<unk>`, and the model would
        see one position fewer than the text has words."""
        if self.whole_words:
            return [i for word in text.split() for i in self._sp.EncodeAsIds(word)]
        return list(self._sp.EncodeAsIds(text))

    def pieces(self, ids: list[int]) -> list[str]:
        """Ids → their pieces, one string per id (special ids give `<pad>`, `<s>`, …)."""
        return [self._sp.IdToPiece(int(i)) for i in ids]

    def decode(self, ids: list[int]) -> str:
        """Ids → text, dropping pad, bos and eos."""
        specials = {self.pad_id, self.bos_id, self.eos_id}
        return self._sp.DecodeIds([int(i) for i in ids if int(i) not in specials])
