"""The Backend: one API over two encoders (ours and transformers), what get_backend returns.

The app, the CLI and the store all go through ``get_backend(...)``. Each backend
(core/encoder/backends/scratch.py, core/encoder/backends/hf.py) only knows how to run its network (``_forward`` /
``_mlm``); tokenising, batching, pooling, inspection and fill-mask are written once, here and in
``core.encoder.fillmask``. The model catalogue is core/encoder/catalog.py; fingerprints are core/encoder/fingerprint.py.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch

from core import machine_cache
from core.device import autocast, describe_device
from core.encoder import fillmask
from core.encoder.batch_input import LENGTH_STEP, bucket_length, bucket_rows, input_tensors
from core.encoder.batching import plan_batches, row_cap, token_budget
from core.encoder.fingerprint import Fingerprint
from core.encoder.kernels import FUSED_BF16_MAX_ROWS
from core.encoder.pooling import l2_normalize, pool
from core.encoder.sources import ModelSource
from core.errors import Cancelled, InputError
from core.names import POOLINGS

log = logging.getLogger(__name__)
# Before "auto" runs a model in bf16, its bf16 vectors of these sentences must keep this cosine
# with its fp32 ones (they reach 0.99997 for minilm); short and long, plain and odd.
BF16_MIN_COSINE = 0.9999
BF16_CHECK_SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog near the river bank.",
    "Quantum chromodynamics describes the strong interaction between quarks and gluons.",
    "ok",
    "Where is the nearest train station, and how late does it open on Sundays?",
    "1984 was published in 1949; its author, George Orwell, died a year later.",
    "Les chats dorment beaucoup pendant la journée.",
    "The committee postponed the vote because three members were absent, which angered the "
    "residents who had waited since early morning to hear the decision on the new bridge.",
]
# What a store may mix: vectors of fp32, and of bf16 where they keep this cosine with fp32's.
PRECISION_POLICY = f"fp32, or bf16 at cosine >= {BF16_MIN_COSINE} with fp32"
# Texts tokenised per chunk ahead of the model off the CPU (Backend.embed's tokenize_ahead): a chunk
# is sorted and batched alone, so it must hold many GPU batches. Not yet measured on a GPU.
TOKENIZE_AHEAD = 8192
MAX_TEXT_CHARS = 1_000_000   # beyond this a "sentence" is a mistake (a whole file pasted in)


@dataclass
class EmbedStats:
    total: int = 0                       # texts embedded
    truncated: int = 0                   # texts cut to the model's maximum length
    truncated_indices: list = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Tokens:
    """Token ids of some texts (Backend.tokenize), for embed(texts, tokens=...): a pipeline
    tokenises the next texts while the model embeds these."""
    ids: list                    # token ids with specials, cut to the model's maximum length
    cut: list                    # indices of the texts that were cut


@dataclass
class Inspection:
    tokens: list                 # as the tokenizer writes them, specials included
    attentions: np.ndarray       # (L, H, T, T) float32
    hidden_states: np.ndarray    # (L + 1, T, D) float32: embeddings output, then each layer
    device: str
    truncated: int = 0           # tokens cut beyond the model's maximum


def _is_cancelled(cancel) -> bool:
    if cancel is None:
        return False
    return cancel.is_set() if hasattr(cancel, "is_set") else bool(cancel())


class Backend:
    """Shared logic. Subclasses set: model_tokenizer (a core.encoder.tokenizer.ModelTokenizer), device, dim,
    n_layers, n_heads, max_length, has_mlm, and implement _forward and _mlm."""

    backend = "?"
    model_tokenizer = None

    @property
    def tokenizer(self):
        """The model's transformers tokenizer (loaded on first use: embedding does not need it)."""
        return self.model_tokenizer.hf

    def __init__(self, source: ModelSource, device: torch.device, precision: str):
        self.source = source
        self.model_name = source.name
        # What a store records: a folder by its absolute path, so the store's model is found
        # again from any working folder (a packaged or hub model by its name).
        self.model_location = (str(source.folder.absolute()) if source.kind in ("folder", "trained")
                               else source.name)
        self.device = device
        self.device_name = describe_device(device)
        self.precision = precision      # "fp32" or "bf16": what embed() runs in
        self.precision_note = precision  # how it was chosen, for people (CLI JSON, status bar)
        self._lock = threading.Lock()   # one forward at a time per model object

    # -- implemented by each backend ------------------------------------------------------
    def _forward(self, input_ids, attention_mask, token_type_ids, hidden=False, attentions=False):
        """-> (last_hidden (B,T,D), hidden_states tuple or None, attentions tuple or None)"""
        raise NotImplementedError

    def _mlm(self, input_ids, attention_mask, per_layer=False):
        """-> (logits (B,T,V), per-layer logits list or None)"""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    network_sha256 = ""   # config + tokenizer files (core.encoder.fingerprint.network_hash)
    default_pooling = "mean"   # the pooling the model was trained for: what embed uses unless told
    pooling_query = None       # attention pooling's learned query (D,) tensor, for a model trained with one

    def choose_pooling(self, pooling: str | None) -> str:
        """The pooling to use (None: the model's default), checked: attention pooling needs
        the query vector only a model trained with it has."""
        pooling = self.default_pooling if pooling is None else pooling
        check_pooling(pooling)
        if pooling == "attention" and self.pooling_query is None:
            raise InputError(
                f"{self.model_name} has no learned query vector, so it cannot pool by attention: "
                "pool by mean, cls or max, or train a model that has one",
                fix={"kind": "train", "settings": {"objective": "simcse", "pooling": "attention"}})
        return pooling

    def fingerprint(self, pooling: str | None = None) -> Fingerprint:
        pooling = self.choose_pooling(pooling)
        return Fingerprint(self.model_location, self.weights_sha256, pooling, self.dim, True,
                           network_sha256=self.network_sha256, precision_policy=PRECISION_POLICY)

    def encode_ids(self, texts: list[str]) -> tuple[list[list[int]], list[int]]:
        """Token ids with specials, cut to max_length; and the indices of texts that were cut."""
        self.check_texts(texts)
        return self.model_tokenizer.encode(texts)

    def encode_input(self, text: str, pair: str | None = None) -> tuple[list[int], list[int] | None, int]:
        """(ids, token type ids, tokens cut) of one text, or of a sentence pair read the BERT
        way: [CLS] text [SEP] pair [SEP], token types 0 then 1, cut longest-first to the
        model's length. Types are None for one text (all 0). The one pair tokenisation: the
        inspector (inspect) and the walkthrough (core.walkthrough.steps.tokenize) both use it."""
        if pair is None or not pair.strip():
            rows, cut = self.encode_ids([text])
            ids, types = rows[0], None
            # verbose=False: counting the full length is not running it (no "indexing errors" warning)
            full = len(self.tokenizer(text, truncation=False, verbose=False)["input_ids"]) if cut else len(ids)
        else:
            for t in (text, pair):
                if not t.strip():
                    raise InputError("both texts of a pair need at least one visible character")
            self.check_texts([text, pair])
            enc = self.tokenizer(text, pair, truncation="longest_first", max_length=self.max_length,
                                 return_token_type_ids=True)
            ids, types = list(enc["input_ids"]), list(enc["token_type_ids"])
            full = len(self.tokenizer(text, pair, truncation=False, verbose=False)["input_ids"])
        return list(ids), types, full - len(ids)

    def tokenize(self, texts) -> Tokens:
        """The texts checked and tokenised as embed() would (thread-safe: the tokenizer
        releases the GIL), for embed(texts, tokens=...)."""
        ids, cut = self.encode_ids(list(texts))
        return Tokens(ids, cut)

    @staticmethod
    def check_texts(texts: list[str]) -> None:
        """An InputError naming the first text that cannot be embedded (empty, or far too long)."""
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise InputError(f"text {i + 1} is empty: every text needs at least one visible character")
            if len(t) > MAX_TEXT_CHARS:
                raise InputError(f"text {i + 1} is {len(t):,} characters long; the limit is "
                                 f"{MAX_TEXT_CHARS:,} (split long documents into sentences)")

    def _batch(self, ids: list[list[int]]):
        """(input_ids, attention mask) (B, T) on the device for these token ids, padded to the longest."""
        input_ids, mask, _ = input_tensors(ids, self.model_tokenizer.pad_token_id or 0, self.device)
        return input_ids, mask

    def embed(self, texts, pooling: str | None = None, batch_size: int | None = None, progress=None,
              cancel=None, stats: EmbedStats | None = None, max_tokens: int | None | str = "auto",
              tokenize_ahead: int | None | str = "auto", shape_buckets: bool | str = "auto",
              tokens: Tokens | None = None) -> np.ndarray:
        """Unit vectors (N, dim) float32 of `texts`, in input order, pooled as asked (None: the
        model's default_pooling). Batches hold at most `batch_size` texts (None: the device's
        row cap) and, with max_tokens, at most that many padded tokens ("auto": the measured
        budget for this model and device, core.encoder.batching.token_budget; None: no cap).
        tokenize_ahead: texts per chunk tokenised on a helper thread while the model runs the
        chunk before ("auto": TOKENIZE_AHEAD texts off the CPU, whose cores the model already
        keeps busy; None: all at once); a chunk is sorted and batched on its own.
        shape_buckets: pad batches to few shapes (core.encoder.batch_input: lengths to a multiple of
        LENGTH_STEP, a short batch's rows to a power of two; "auto": off the CPU, where each new
        shape costs the GPU a new kernel plan); the vectors are the same either way.
        tokens: the texts' tokenize() already (then nothing is tokenised here).
        The vectors stay on the device until the last batch and come back in one copy."""
        pooling = self.choose_pooling(pooling)
        if batch_size is None:
            batch_size = row_cap(self.device.type)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch size must be a whole number of at least 1, not {batch_size!r}")
        texts = list(texts)
        if tokens is not None and len(tokens.ids) != len(texts):
            raise InputError(f"{len(texts)} texts but {len(tokens.ids)} tokenised ones")
        t0 = time.perf_counter()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if tokenize_ahead == "auto":
            tokenize_ahead = None if self.device.type == "cpu" else TOKENIZE_AHEAD
        if max_tokens == "auto":
            max_tokens = token_budget(self.dim, self.device.type)
        if shape_buckets == "auto":
            shape_buckets = self.device.type != "cpu"
        pad_id = self.model_tokenizer.pad_token_id or 0
        done, cut = 0, []
        order, pooled = [], []
        with self._lock, torch.inference_mode(), autocast(self.device, self.precision):
            chunks = (self._tokenised(texts, tokenize_ahead) if tokens is None
                      else [(0, tokens.ids, list(tokens.cut))])
            for start, ids, chunk_cut in chunks:
                cut += chunk_cut
                lengths = [len(x) for x in ids]
                if shape_buckets:
                    lengths = [bucket_length(n, LENGTH_STEP, self.max_length) for n in lengths]
                for rows in plan_batches(lengths, batch_size, max_tokens):
                    if _is_cancelled(cancel):
                        raise Cancelled(f"embedding cancelled after {done} of {len(texts)} texts")
                    longest = lengths[rows[-1]]     # sorted ascending (with buckets: a bucket's length)
                    fill = bucket_rows(len(rows), full_rows(longest, batch_size, max_tokens)) if shape_buckets else 0
                    input_ids, mask, padded = input_tensors([ids[i] for i in rows], pad_id, self.device, longest, fill)
                    # no padding (known here): no mask, so the model need not ask the device whether any
                    hidden, _, _ = self._forward(input_ids, mask if padded else None, None)
                    if len(rows) < len(mask):              # filler rows of a bucketed batch
                        hidden, mask = hidden[:len(rows)], mask[:len(rows)]
                    pooled.append(l2_normalize(pool(hidden.float(), mask, pooling, query=self.pooling_query)))
                    order.extend(start + i for i in rows)
                    done += len(rows)
                    if progress is not None:
                        progress(done, len(texts))
            # one copy back (on a GPU, the one wait for its queued work)
            out[order] = (pooled[0] if len(pooled) == 1 else torch.cat(pooled)).cpu().numpy()
        if cut and stats is None:     # a caller that collects stats says it once, for all its calls
            log.warning("%d of %d texts were longer than %d tokens and were truncated",
                        len(cut), len(texts), self.max_length)
        if stats is not None:
            stats.total += len(texts)
            stats.truncated += len(cut)
            stats.truncated_indices.extend(cut)
            stats.seconds += time.perf_counter() - t0
        return out

    def _tokenised(self, texts: list[str], chunk: int | None):
        """(offset, token ids, indices of the texts cut) per chunk of `chunk` texts (None: one
        chunk); with several, chunk k + 1 is tokenised on a helper thread (the tokenizer
        releases the GIL) while the caller runs chunk k. Every text is checked first."""
        if chunk is None or chunk >= len(texts):
            ids, cut = self.encode_ids(texts)
            yield 0, ids, cut
            return
        self.check_texts(texts)
        with ThreadPoolExecutor(1, thread_name_prefix="encoderscope-tokenize") as ahead:
            job = ahead.submit(self.model_tokenizer.encode, texts[:chunk])
            for start in range(0, len(texts), chunk):
                ids, cut = job.result()
                if start + chunk < len(texts):
                    job = ahead.submit(self.model_tokenizer.encode, texts[start + chunk:start + 2 * chunk])
                yield start, ids, [start + i for i in cut]

    def token_vectors(self, text: str, precision: str | None = None,
                      padded_to: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(tokens, final-layer token vectors (T, D) float32, special-token mask (T,) bool) of one
        text: the forward pass ``embed`` pools, for core.evaluate.why to split a score over token pairs.

        precision: what to run in (default: this backend's). padded_to: run the text as a row of
        a store's ingest batch padded to that many tokens (0: alone). In fp32 that changes nothing
        that shows (~1e-7); in bf16 a padded batch takes other kernels than one text alone, on both
        backends, and its vectors differ by up to ~5e-4: a score splits exactly only when its
        stored vector's kernels are run again."""
        ids = self.encode_ids([text])[0][0]
        rows = [ids]
        if padded_to:
            # a longer row pads the text's row; one-token rows make enough rows for our encoder's
            # padded-batch attention path (core.encoder.kernels.FUSED_BF16_MAX_ROWS) even for a short text
            width = min(max(padded_to, len(ids) + 1), self.max_length)
            longer = [(ids + ids[-1:] * width)[:width]] if width > len(ids) else []
            rows += longer + [ids[:1]] * max(1, -(-(FUSED_BF16_MAX_ROWS + 1) // width))
        with self._lock, torch.inference_mode(), autocast(self.device, precision or self.precision):
            input_ids, mask = self._batch(rows)
            hidden, _, _ = self._forward(input_ids, mask, None)
        special = self.model_tokenizer.template_mask(text, len(ids))
        return (self.tokenizer.convert_ids_to_tokens(ids), hidden[0, :len(ids)].float().cpu().numpy(),
                np.array(special, dtype=bool))

    def inspect(self, text: str, pair: str | None = None) -> Inspection:
        """Tokens, every layer's attentions and hidden states for one text, or for a sentence
        pair read the BERT way: [CLS] text [SEP] pair [SEP], with token types 0 then 1."""
        ids, types, cut = self.encode_input(text, pair)
        # Inspection shows the model's exact numbers: fp32 whatever the embedding precision.
        with self._lock, torch.inference_mode():
            input_ids, mask = self._batch([ids])
            type_ids = None if types is None else torch.tensor([types], device=self.device)
            _, hidden, att = self._forward(input_ids, mask, type_ids, hidden=True, attentions=True)
        return Inspection(
            tokens=self.tokenizer.convert_ids_to_tokens(ids),
            attentions=torch.stack([a[0] for a in att]).float().cpu().numpy(),
            hidden_states=torch.stack([h[0] for h in hidden]).float().cpu().numpy(),
            device=self.device_name, truncated=cut)

    def mlm_logits(self, ids: list[int], per_layer: bool = False):
        """Masked-LM logits of one tokenised text: (1, T, V), and each layer's (a list) or None.
        fp32 whatever the embedding precision: one sentence, and probabilities people read."""
        with self._lock, torch.inference_mode():
            input_ids, mask = self._batch([ids])
            return self._mlm(input_ids, mask, per_layer)

    def fill_mask(self, text: str, top_k: int = 5, targets=None, per_layer: bool = False):
        return fillmask.fill_mask(self, text, top_k=top_k, targets=targets, per_layer=per_layer)

    def describe(self) -> dict:
        return {"model": self.model_name, "backend": self.backend, "device": self.device_name,
                "dim": self.dim, "layers": self.n_layers, "heads": self.n_heads,
                "max_length": self.max_length, "mlm_head": self.has_mlm, "source": self.source.kind,
                "precision": self.precision, "precision_note": self.precision_note}

    def check_bf16(self, min_cosine: float | None = None, memo: str | None = None) -> float:
        """Embed fixed sentences in fp32 and in bf16; keep bf16 only if every pair of vectors
        has cosine >= ``min_cosine``, else fall back to fp32 (logged, and said in
        ``precision_note``). Returns the smallest cosine. ``memo``: a key under which the
        cosine is remembered on disk for later starts (core/machine_cache.py)."""
        min_cosine = BF16_MIN_COSINE if min_cosine is None else min_cosine
        cos = machine_cache.load(machine_cache.BF16_CHECK).get(memo) if memo else None
        if cos is None:
            was, self.precision = self.precision, "fp32"
            try:
                ref = self.embed(BF16_CHECK_SENTENCES)
                self.precision = "bf16"
                fast = self.embed(BF16_CHECK_SENTENCES)
            finally:
                self.precision = was
            cos = float((ref * fast).sum(1).min())
            if memo:
                machine_cache.save(machine_cache.BF16_CHECK, {memo: cos})
        if cos >= min_cosine:
            self.precision = "bf16"
            self.precision_note = (f"bf16 (native here; min cosine {cos:.6f} with fp32 on "
                                   f"{len(BF16_CHECK_SENTENCES)} check sentences)")
        else:
            self.precision = "fp32"
            self.precision_note = (f"fp32: bf16 vectors of {self.model_name} differed from fp32 "
                                   f"(min cosine {cos:.6f} < {min_cosine})")
            log.warning("%s", self.precision_note)
        return cos


def full_rows(length: int, max_rows: int, max_tokens: int | None) -> int:
    """The rows of a full batch of texts `length` tokens long (core.encoder.batching.plan_batches)."""
    return max_rows if max_tokens is None else max(1, min(max_rows, max_tokens // length))


def check_pooling(pooling: str):
    if pooling not in POOLINGS:
        raise InputError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
