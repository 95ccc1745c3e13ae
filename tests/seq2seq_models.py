"""Tiny random `transformers` encoder-decoders (Marian, BART, T5) and a word-level tokenizer for them, built offline
from configs: what the encoder-decoder tests run."""

from __future__ import annotations

import torch
import transformers
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]  # ids 0–3
WORDS = "the cat dog sat on mat rug a . die Katze Hund sass auf der Matte".split()
SOURCE = "the cat sat on the mat ."
OTHER = "the dog sat on the rug ."  # as many tokens as SOURCE: a minimal pair
TARGET = "die Katze sass auf der Matte"
FAMILIES = ("marian", "bart", "t5")


def word_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """Words by whitespace, `</s>` after each text, as these models' tokenizers end a source and a target."""
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def tiny(family: str) -> torch.nn.Module:
    """A seeded random model of `family`, 2 + 2 layers, 2 heads of 8, norms and biases moved off their start."""
    torch.manual_seed(0)
    vocab = len(SPECIALS + WORDS)
    sizes = {"vocab_size": vocab, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    bart_like = {"d_model": 16, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2}
    bart_like |= {"decoder_attention_heads": 2, "encoder_ffn_dim": 24, "decoder_ffn_dim": 24}
    bart_like |= {"max_position_embeddings": 32, "dropout": 0.0, "init_std": 0.5}  # large: sources that differ show
    if family == "marian":
        model = transformers.MarianMTModel(transformers.MarianConfig(**sizes, **bart_like, decoder_start_token_id=0))
    elif family == "bart":
        model = transformers.BartForConditionalGeneration(
            transformers.BartConfig(**sizes, **bart_like, decoder_start_token_id=2, forced_bos_token_id=None)
        )
    else:
        config = transformers.T5Config(
            **sizes,
            d_model=16,
            d_kv=8,
            d_ff=24,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=2,
            decoder_start_token_id=0,
            dropout_rate=0.0,
            initializer_factor=8.0,
        )
        model = transformers.T5ForConditionalGeneration(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.2)
    return model.eval()
