"""A word-level tokenizer built from a corpus: the seed notebooks' tokenizer, made real.

Lower-case the text, split on whitespace and punctuation (each punctuation mark its own token),
keep the words seen in the corpus (most frequent first) and map the rest to [UNK]. Wrapped as a
``transformers`` fast tokenizer, so it saves as ``tokenizer.json`` and loads back with
``AutoTokenizer.from_pretrained`` like any other model's tokenizer: nothing downstream needs to
know it is word-level.

    tok = build_word_tokenizer(sentences, vocab_size=8000, min_frequency=2)
    tok("The cat sat.")  ->  [CLS] the cat sat . [SEP]
"""
from __future__ import annotations

from collections.abc import Iterable

from core.encoder.transformers_import import from_transformers
from core.errors import InputError
from core.names import MASK

PAD, UNK, CLS, SEP = "[PAD]", "[UNK]", "[CLS]", "[SEP]"
SPECIALS = [PAD, UNK, CLS, SEP, MASK]          # ids 0..4, in this order ([PAD] = 0 as the model expects)


def build_word_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 1,
                         max_length: int = 128):
    """Count the words of ``texts`` and return a ``PreTrainedTokenizerFast``.

    vocab_size: the largest vocabulary, specials included (the most frequent words are kept).
    min_frequency: words seen fewer times than this become [UNK].
    max_length: the tokenizer's model_max_length (longest sequence the model takes).
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    PreTrainedTokenizerFast = from_transformers("PreTrainedTokenizerFast")

    if vocab_size <= len(SPECIALS):
        raise InputError(f"vocab_size must be larger than the {len(SPECIALS)} special tokens")
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()      # whitespace + every punctuation mark
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=SPECIALS, show_progress=False)
    tok.train_from_iterator(texts, trainer)
    if tok.get_vocab_size() <= len(SPECIALS):
        raise InputError("the corpus has no words to build a vocabulary from")
    cls_id, sep_id = tok.token_to_id(CLS), tok.token_to_id(SEP)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, cls_id), (SEP, sep_id)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token=UNK, pad_token=PAD, cls_token=CLS, sep_token=SEP,
        mask_token=MASK, model_max_length=max_length)
