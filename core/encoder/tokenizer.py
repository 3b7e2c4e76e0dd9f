"""A model's tokenizer: transformers' AutoTokenizer, and the Rust pipeline inside it kept on disk
so that a later start embeds without importing transformers (start-up time).

Importing transformers and building the model's tokenizer class costs ~1 s of CPU, a third of a
cold start's first search result, yet what embedding calls is only the `tokenizers` pipeline
that the transformers tokenizer wraps. So the first load of a folder (AutoTokenizer, as always)
also writes that pipeline to the data folder's ``cache/tokenizers/``, keyed by the contents of
the folder's tokenizer files and the versions of transformers and tokenizers, and only after the
kept copy tokenised CHECK_TEXTS to exactly the ids the transformers tokenizer gave. A later load
finds it and builds it with `tokenizers` alone (~20 ms); the transformers tokenizer is then
loaded only when something asks for it (pairs, token names, fill-mask, training, saving).

One encoding either way: `ModelTokenizer.encode` is the pipeline's `encode_batch_fast` with the
truncation transformers sets for ``truncation=True, max_length=...`` (longest_first, stride 0,
the tokenizer's truncation side), or, for a folder whose copy failed the check, that call.
From TWIN_FROM texts on, the pipeline's plain-text twin (core.encoder.ascii_twin) takes the
texts that are all printable ASCII: the same ids, proven on check texts before it is used.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from core.encoder.ascii_twin import pipeline_encode, twin_of
from core.encoder.transformers_import import from_transformers, transformers_lock
from core.errors import ModelUnavailable
from core.files import cache_file as cache_file_io

log = logging.getLogger(__name__)

# A folder needs one of these for AutoTokenizer to read a real vocabulary: without them
# transformers 5 quietly builds an empty tokenizer that turns every word into [UNK].
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model",
                   "sentencepiece.bpe.model")
# Everything AutoTokenizer reads to decide the class and its settings: the cache key hashes them.
KEY_FILES = TOKENIZER_FILES + ("merges.txt", "tokenizer_config.json", "special_tokens_map.json",
                               "added_tokens.json", "config.json")
CACHE_FORMAT = "encoderscope-tokenizer-pipeline/2"
# Kept pipelines (~0.5 MB for a 30k WordPiece vocabulary): the least recently used beyond this
# many are removed when one is written, so checkpoints and library upgrades don't pile up.
CACHE_KEEP = 32
CACHE_NAME = r"[0-9a-f]{32}\.json"     # cache_file(): the only names this cache writes, or prunes
CACHE_MAX_BYTES = 256 << 20            # a 250k-piece multilingual vocabulary is ~20 MB
# Texts in one encode() from which the plain-text twin is worth building (ascii_twin).
TWIN_FROM = 64
# What the kept pipeline must tokenise exactly as transformers did before it is trusted: cases,
# accents, scripts, emoji, spacing, control and zero-width characters, special-token spellings,
# numbers and punctuation, and a text long enough to be cut at any model's max_length.
CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "HELLO World, hello WORLD! MiXeD CaSe",
    "Café naïve résumé façade coöperate Ångström",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "مرحبا بالعالم — Привет, мир — γειά σου κόσμε — नमस्ते दुनिया",
    "emoji 🙂👍🏽 and symbols ™ © ½ ∑ → ≠ ∞",
    "  leading and trailing spaces, \ttabs\tand\nnew\nlines  ",
    "zero\u200bwidth, soft\u00adhyphen, bell\u0007, nbsp\u00a0here, e\u0301 combining",
    "[MASK] [CLS] [SEP] [PAD] [UNK] <mask> <s> </s> <pad> [mask]",
    "e.g., U.S.A. -- it's 3.14159 or 1,000,000 (approx.) at 10:45pm; user@example.com #tag",
    "unbelievably antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    " ".join(["a long text that has to be cut at the model's max length"] * 400),
)


def load_tokenizer(folder: Path, vocab_size: int | None = None):
    """The folder's transformers tokenizer (fast, no remote code), checked against the model's
    vocabulary size; ModelUnavailable with the reason when it cannot be used."""
    AutoTokenizer = from_transformers("AutoTokenizer")
    check_has_tokenizer(folder)
    try:
        with transformers_lock():       # it imports the tokenizer class's module lazily
            tok = AutoTokenizer.from_pretrained(str(folder), use_fast=True, trust_remote_code=False)
    except Exception as e:
        raise ModelUnavailable(f"cannot load the tokenizer in {folder}: {our_reason(e)}") from None
    if not tok.is_fast:
        raise ModelUnavailable(f"the tokenizer in {folder} has no fast (Rust) version")
    check_size(folder, len(tok), vocab_size)
    return tok


# Library advice we never follow (remote code stays off; a tokenizer we cannot build from the
# folder's files is not fixed by another package): replaced by what is true here.
FOREIGN_ADVICE = ("trust_remote_code", "sentencepiece", "tiktoken", "weights_only")


def our_reason(e: Exception) -> str:
    """The library's reason for a failed tokenizer load, without advice that contradicts our
    rules (enabling remote code, installing converters for a custom class)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if any(word in str(e) for word in FOREIGN_ADVICE):
        return ("its tokenizer cannot be built from the folder's files without running code or "
                "converters from elsewhere, which Encoderscope never does; give it a "
                "tokenizer.json (save the tokenizer with a fast tokenizer's save_pretrained)")
    return text


def check_has_tokenizer(folder: Path) -> None:
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise ModelUnavailable(f"{folder} has no tokenizer files (tokenizer.json or vocab.txt); "
                               "copy them from the model the weights came from")


def check_size(folder: Path, size: int, vocab_size: int | None) -> None:
    if vocab_size is not None and size > vocab_size:
        raise ModelUnavailable(f"the tokenizer in {folder} has {size:,} tokens but the model's "
                               f"vocabulary has {vocab_size:,}: they belong to different models")


def max_length_of(model_max: int, tokenizer_max: int | None) -> int:
    return int(min(model_max, tokenizer_max or model_max))   # tokenizers say 1e30 when they don't know


@dataclass(frozen=True)
class Settings:
    """What embedding needs of a tokenizer besides its pipeline."""
    size: int                       # len(tokenizer): vocabulary plus added tokens
    pad_token_id: int | None
    model_max_length: int | None    # None when the tokenizer does not say
    truncation_side: str            # "right" (cut the end) or "left"
    split_special_tokens: bool      # "[MASK]" typed in a text: one special token (False) or pieces

    @classmethod
    def of(cls, tok) -> Settings:
        tmax = getattr(tok, "model_max_length", None)
        return cls(len(tok), tok.pad_token_id, int(tmax) if tmax and tmax < 1e12 else None,
                   tok.truncation_side, bool(getattr(tok, "split_special_tokens", False)))


def cache_key(folder: Path) -> str:
    """sha256 of the folder's tokenizer files (names and bytes) and the library versions."""
    from importlib.metadata import version

    import tokenizers
    h = hashlib.sha256(f"{CACHE_FORMAT}|transformers {version('transformers')}|tokenizers "
                       f"{tokenizers.__version__}".encode())
    for name in KEY_FILES:
        p = folder / name
        if p.is_file():
            h.update(f"|{name}|".encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cache_file(key: str) -> Path:
    from core.paths import data_dir
    return data_dir() / "cache" / "tokenizers" / f"{key[:32]}.json"


def read_cached(key: str):
    """(pipeline, Settings) kept for `key`, or None: missing, not a regular file (a FIFO in its place
    is never opened), unreadable, for another key, or altered since it was written (its sha256 no
    longer matches its pipeline and settings)."""
    from tokenizers import Tokenizer
    path = cache_file(key)
    try:
        data = cache_file_io.read(path, CACHE_MAX_BYTES)
        if data is None:
            return None
        rec = json.loads(data)
        if not _is_record(rec) or rec.get("key") != key:
            return None
        body, settings = rec["pipeline"], rec["settings"]
        if _digest(body, settings) != rec["sha256"]:
            log.warning("ignoring %s: it was altered after it was written", path)
            return None
        kept = Tokenizer.from_str(body), Settings(**settings)
        os.utime(path)        # recently used: the last to be removed (CACHE_KEEP)
        return kept
    except cache_file_io.Unusable as e:
        log.warning("ignoring %s: it %s", path, e)
        return None
    except Exception:   # not JSON, fields missing, a pipeline tokenizers rejects
        return None


def _is_record(rec) -> bool:
    """Is this decoded JSON one of this cache's records (its format and fields)?"""
    return (isinstance(rec, dict) and rec.get("format") == CACHE_FORMAT and isinstance(rec.get("key"), str)
            and isinstance(rec.get("pipeline"), str) and isinstance(rec.get("sha256"), str)
            and isinstance(rec.get("settings"), dict))


def _is_our_file(data: bytes) -> bool:
    try:
        return _is_record(json.loads(data))
    except ValueError:
        return False


def _digest(body: str, settings: dict) -> str:
    """What a kept file's sha256 covers: the pipeline and the settings beside it."""
    return hashlib.sha256((json.dumps(settings, sort_keys=True) + "\n" + body).encode()).hexdigest()


def write_cached(key: str, pipeline, settings: Settings) -> None:
    body, fields = pipeline.to_str(), asdict(settings)
    rec = {"format": CACHE_FORMAT, "key": key, "settings": fields, "sha256": _digest(body, fields),
           "pipeline": body}
    path = cache_file(key)
    if cache_file_io.write(path, json.dumps(rec).encode("utf-8"), what="tokenizer pipeline", names=CACHE_NAME):
        # only this cache's own files: its names and its records, never another file in the folder
        cache_file_io.prune(path.parent, CACHE_NAME, CACHE_KEEP, _is_our_file, CACHE_MAX_BYTES)


class ModelTokenizer:
    """A model folder's tokenizer for a Backend: `encode` for embedding (the kept pipeline when
    there is one), `hf` the transformers tokenizer, loaded on first use, for everything else."""

    def __init__(self, folder: Path, model_max: int, vocab_size: int | None = None):
        self.folder = Path(folder)
        self.vocab_size = vocab_size
        self._hf = None
        self._lock = threading.Lock()
        self._twin = None           # None: not built yet; False: this pipeline has none
        check_has_tokenizer(self.folder)
        key = cache_key(self.folder)
        kept = read_cached(key)
        if kept is None:
            self._hf = load_tokenizer(self.folder, vocab_size)
            self.settings = Settings.of(self._hf)
            self.max_length = max_length_of(model_max, self.settings.model_max_length)
            self._pipeline = self._copy_pipeline(self._hf)
            if self._pipeline is not None:
                write_cached(key, self._pipeline, self.settings)     # the copy that passed the check
        else:
            pipeline, self.settings = kept
            check_size(self.folder, self.settings.size, vocab_size)
            self.max_length = max_length_of(model_max, self.settings.model_max_length)
            self._pipeline = self._configured(pipeline)

    @property
    def hf(self):
        """The transformers tokenizer (imports transformers the first time)."""
        with self._lock:
            if self._hf is None:
                self._hf = load_tokenizer(self.folder, self.vocab_size)
            return self._hf

    @property
    def loaded(self) -> bool:
        """Is the transformers tokenizer loaded (asking for ``hf`` will not import transformers)?"""
        return self._hf is not None

    @property
    def pad_token_id(self) -> int | None:
        return self.settings.pad_token_id

    def __len__(self) -> int:
        return self.settings.size

    def encode(self, texts: list[str]) -> tuple[list[list[int]], list[int]]:
        """Token ids with specials, cut to max_length; and the indices of texts that were cut."""
        if self._pipeline is None:
            return self._encode_hf(texts)
        twin = self._twin
        if twin is None and len(texts) >= TWIN_FROM:
            twin = self._build_twin()
        return twin.encode(texts) if twin else pipeline_encode(self._pipeline, texts)

    def _build_twin(self):
        """The pipeline's plain-text twin (core.encoder.ascii_twin), built once on first need:
        its ~60 ms of building and checking would lengthen a cold start's one-query search."""
        with self._lock:
            if self._twin is None:
                self._twin = twin_of(self._pipeline, CHECK_TEXTS) or False
            return self._twin

    def template_mask(self, text: str, length: int) -> list[bool]:
        """Which of the text's first `length` tokens (as encode() gives them) the tokenizer's
        template added ([CLS], [SEP]): a [MASK] typed in the text is the text's own token."""
        if self._pipeline is not None:
            mask = self._pipeline.encode(text, add_special_tokens=True).special_tokens_mask
        else:
            mask = self.hf(text, add_special_tokens=True, truncation=True, max_length=self.max_length,
                           return_special_tokens_mask=True)["special_tokens_mask"]
        return [bool(m) for m in mask[:length]]

    def _encode_hf(self, texts):
        enc = self.hf(texts, add_special_tokens=True, truncation=True, max_length=self.max_length,
                      return_overflowing_tokens=True)
        # A text longer than max_length comes back as several rows; its first row is the cut text.
        ids, cut = [None] * len(texts), []
        for row, i in enumerate(enc["overflow_to_sample_mapping"]):
            if ids[i] is None:
                ids[i] = enc["input_ids"][row]
            elif not cut or cut[-1] != i:
                cut.append(i)
        return ids, cut

    def _configured(self, pipeline):
        """The pipeline set up as transformers sets it for truncation=True, max_length, no padding."""
        pipeline.no_padding()
        pipeline.enable_truncation(max_length=self.max_length, stride=0, strategy="longest_first",
                                   direction=self.settings.truncation_side)
        pipeline.encode_special_tokens = self.settings.split_special_tokens
        return pipeline

    def _copy_pipeline(self, hf):
        """A copy of hf's pipeline (through its serialised form, as the cache keeps it), or None
        when the copy does not tokenise CHECK_TEXTS exactly as hf does."""
        from tokenizers import Tokenizer
        try:
            copy = self._configured(Tokenizer.from_str(hf.backend_tokenizer.to_str()))
        except Exception as e:      # a pipeline tokenizers cannot serialise: keep using hf
            log.info("the tokenizer of %s cannot be kept: %s", self.folder, e)
            return None
        texts = list(CHECK_TEXTS)
        if pipeline_encode(copy, texts) != self._encode_hf(texts):
            log.warning("the tokenizer of %s is not kept: its serialised pipeline tokenises "
                        "differently from transformers' tokenizer", self.folder)
            return None
        return copy
