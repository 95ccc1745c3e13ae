"""Tokenizers of published models, read from the model's own files with the `tokenizers` library: a tokenizer.json,
or a byte-level BPE's vocabulary and merges (a GGUF file's, a GPT-2's vocab.json and merges.txt). Same interface
as inference.tokenizer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from inference.tokenizer import TokenizerError

SPECIALS = ("pad_id", "unk_id", "bos_id", "eos_id")
# How vocabularies spell padding and the start of text: pieces no text is made of (PretrainedTokenizer.not_text).
NOT_TEXT_PIECES = ("<pad>", "[PAD]", "<|pad|>", "<s>", "[CLS]", "<|startoftext|>")


class BytePiece(str):
    """A piece of a byte-level BPE (GPT-2, SmolLM2): each character stands for one byte of the text, `Ġ` for a space,
    `Ċ` for a new line. Equal to, and hashed as, the vocabulary's spelling, so lookups and exports are unchanged;
    `byte_level` tells viz.labels.display_piece to show the text it stands for. A flag the piece carries, not a
    guess from its letters: the byte table also holds letters ("ü", "ß") a SentencePiece piece may have."""

    __slots__ = ()
    byte_level = True


def _byte_level(spec: Mapping[str, object]) -> bool:
    """Whether a tokenizer.json's decoder turns byte characters back into bytes (GPT-2's `ByteLevel`, alone or in a
    `Sequence`)."""
    decoder = spec.get("decoder") or {}
    parts = (decoder.get("decoders") or [decoder]) if isinstance(decoder, dict) else []
    return any(isinstance(part, dict) and part.get("type") == "ByteLevel" for part in parts)


class PretrainedTokenizer:
    """A `tokenizers.Tokenizer` with the pad/unk/bos/eos ids our model and analysis rely on.

    Text is encoded as text: a special token typed into it (`[SEP]`, `<|im_end|>`) is split like any other
    characters, so padding and end-of-text ids only ever come from the code, never from what a user types.
    """

    def __init__(
        self, tokenizer: object, specials: Mapping[str, int], source: str, mask_piece: str | None = None
    ) -> None:
        self._tok = tokenizer
        self.source = source
        self.mask_piece = mask_piece  # the one special a user may type (a masked-LM's [MASK]), or None
        self.mask_id = None if mask_piece is None else tokenizer.token_to_id(mask_piece)
        if mask_piece is not None and self.mask_id is None:
            raise TokenizerError(f"{source}: the vocabulary has no {mask_piece!r}")
        tokenizer.no_truncation()  # a sentence-transformers file truncates to 128: text.py cuts to max_len instead
        tokenizer.no_padding()
        tokenizer.encode_special_tokens = True
        spec = tokenizer.to_str()
        self.sha256 = hashlib.sha256(spec.encode("utf-8")).hexdigest()
        self.byte_level = _byte_level(json.loads(spec))  # its pieces are BytePiece: shown as the text they stand for
        missing = [name for name in SPECIALS if name not in specials]
        if missing:
            raise TokenizerError(f"{source}: no {', '.join(m.removesuffix('_id') for m in missing)} token")
        for name, value in specials.items():
            if not 0 <= value < self.vocab_size:
                raise TokenizerError(f"{source}: {name} {value} is outside the vocabulary of {self.vocab_size}")
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = (int(specials[name]) for name in SPECIALS)

    @classmethod
    def from_json(
        cls, data: bytes, special_pieces: Mapping[str, str], source: str, mask_piece: str | None = None
    ) -> PretrainedTokenizer:
        """A tokenizer.json; `special_pieces` names the piece of each special (`{"bos_id": "[CLS]", …}`);
        `mask_piece`, typed in a text, becomes the mask token (a masked-LM's [MASK])."""
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:  # tokenizers raises its own Exception subclass with the parser's message
            raise TokenizerError(f"{source}: not a tokenizer.json ({exc})") from exc
        specials = {}
        for name, piece in special_pieces.items():
            index = tokenizer.token_to_id(piece)
            if index is None:
                raise TokenizerError(f"{source}: the vocabulary has no {piece!r} ({name.removesuffix('_id')})")
            specials[name] = index
        return cls(tokenizer, specials, source, mask_piece)

    @classmethod
    def byte_level_bpe(
        cls,
        tokens: Sequence[str],
        merges: Sequence[str],
        control: Sequence[int],
        specials: Mapping[str, int],
        source: str,
        split_digits: bool = True,
    ) -> PretrainedTokenizer:
        """GPT-2-style byte-level BPE from a vocabulary (index = id), its merges ("a b") and the ids of its control
        tokens. `split_digits`: digits are split one by one before the byte-level split, as SmolLM2's own tokenizer
        does (and llama.cpp for its `smollm` pre-tokenizer); GPT-2's own does not."""
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        vocab = {token: index for index, token in enumerate(tokens)}
        if len(vocab) != len(tokens):
            raise TokenizerError(f"{source}: the vocabulary repeats a token")
        pairs = []
        for merge in merges:
            left, _, right = merge.partition(" ")
            pairs.append((left, right))
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
        digits = [pre_tokenizers.Digits(individual_digits=True)] if split_digits else []
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [*digits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        )
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in control])
        return cls(tokenizer, specials, source)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    @property
    def never_written(self) -> frozenset[int]:
        """Special ids never offered as predictions: a padding piece of its own and BERT's [CLS], which no
        training target ever was. A published model's other control tokens (SmolLM2's <|endoftext|>, which our
        loader also names its unknown token) are text it was trained to write, so they stay."""
        never = {"[PAD]", "<pad>", "[CLS]"}
        return frozenset(i for i in {self.pad_id, self.bos_id} if self._tok.id_to_token(i) in never)

    @property
    def not_text(self) -> frozenset[int]:
        """Ids no text is made of: the padding and start-of-text ids, and the vocabulary's own pieces spelled as
        padding or a start of text (a GPT-2 tokenizer may hold a `<s>` and a `<pad>` its model never uses), the
        end of text excepted (it is written). The logit lens never names them (analysis.attribution)."""
        spelled = (self._tok.token_to_id(piece) for piece in NOT_TEXT_PIECES)
        return frozenset({self.pad_id, self.bos_id, *(i for i in spelled if i is not None)} - {self.eos_id})

    def encode(self, text: str) -> list[int]:
        """Text → ids, without bos/eos (callers add what their model expects); a typed mask piece is the mask."""
        if self.mask_piece is None or self.mask_piece not in text:
            return list(self._tok.encode(text, add_special_tokens=False).ids)
        ids: list[int] = []
        for i, part in enumerate(text.split(self.mask_piece)):
            ids += [self.mask_id] if i else []
            ids += self._tok.encode(part, add_special_tokens=False).ids if part.strip() else []
        return ids

    def pieces(self, ids: list[int]) -> list[str]:
        """Ids → their pieces as the vocabulary spells them (byte-level BPE writes a space as `Ġ`: its pieces are
        BytePiece, which viz shows as the text they stand for)."""
        spelled = [self._tok.id_to_token(int(i)) or "" for i in ids]
        return [BytePiece(p) for p in spelled] if self.byte_level else spelled

    def decode(self, ids: list[int]) -> str:
        """Ids → text, dropping pad, bos and eos."""
        drop = {self.pad_id, self.bos_id, self.eos_id}
        return self._tok.decode([int(i) for i in ids if int(i) not in drop], skip_special_tokens=False)
