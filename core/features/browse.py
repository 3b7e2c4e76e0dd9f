"""The feature browser's data: per feature its top-activating tokens in their sentences, an
activation histogram and density, the vocabulary its decoder direction aligns with, the tokens it
promotes (models with a masked-LM head), and a short label; built once over a corpus and kept in
the SAE's folder as data (safetensors + JSON, validated on load).

    index = build_feature_index(backend, sae, meta, sentences, sae_folder)
    index = FeatureIndex.load(sae_folder)          # later, without the model
    s = index.summary(17)                          # FeatureSummary: label, density, top_examples ...
    index.features(sort="density")                 # live features, densest first
    index.find("cat")                              # features whose top examples are "cat"
    token_features(backend, sae, meta, "the cat sat")   # each token's strongest features

One pass over the corpus keeps each feature's TOP_EXAMPLES strongest tokens (streamed, never all
codes in memory); a second, over only the sentences those examples come from, records each
example sentence's activations of that feature for highlighting.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.errors import InputError
from core.features.collect import iter_activations
from core.features.sae import SparseAutoencoder
from core.features.saved import WEIGHTS_FILE, SaeMeta
from core.files.atomic import atomic_write

INDEX_FILE = "feature_index.safetensors"
INDEX_JSON = "feature_index.json"
FORMAT = 1
TOP_EXAMPLES = 12        # strongest tokens kept per feature
TOP_VOCAB = 10           # vocabulary tokens per feature (aligned, promoted)
HIST_BINS = 40           # log-spaced activation bins, from 1e-3 to 10 x the typical activation norm
LABEL_TOKENS = 3


@dataclass(frozen=True)
class Example:
    sentence_id: int
    sentence: str
    tokens: list              # the sentence's tokens, [CLS] and [SEP] included
    position: int             # the example token's index in ``tokens``
    activation: float
    token_activations: list   # the feature's activation at every token (0 where silent)


@dataclass(frozen=True)
class FeatureSummary:
    feature: int
    label: str
    density: float                       # fraction of the corpus's tokens it fires on
    max_activation: float
    top_examples: list                   # Example, strongest first
    histogram: tuple                     # (bin_edges (B + 1,), counts (B,)) of its non-zero activations
    vocab_aligned: list                  # (token, cosine of its input embedding with the feature's direction)
    promoted: list | None                # (token, logit change) through the MLM head; None without one


def sae_sha256(folder) -> str:
    return hashlib.sha256((Path(folder) / WEIGHTS_FILE).read_bytes()).hexdigest()


def _clean_token(t: str) -> str:
    return t.lower().removeprefix("##")


class FeatureIndex:
    """The browser's arrays (numpy) and texts; see the module docstring."""

    def __init__(self, arrays: dict, info: dict):
        self.a, self.info = arrays, info
        self.width = int(arrays["count"].shape[0])
        self._tokens = {int(k): v for k, v in info["tokens"].items()}
        self._sentences = {int(k): v for k, v in info["sentences"].items()}

    # -- reading ---------------------------------------------------------------------------
    @property
    def n_tokens(self) -> int:
        return int(self.info["n_tokens"])

    def density(self, f: int) -> float:
        return float(self.a["count"][f]) / max(1, self.n_tokens)

    def dead(self) -> np.ndarray:
        return self.a["count"] == 0

    def features(self, sort: str = "density", filter_dead: bool = True) -> list[int]:
        """Feature ids: densest first ("density"), strongest first ("max") or by id."""
        ids = np.arange(self.width)
        if filter_dead:
            ids = ids[~self.dead()]
        if sort == "density":
            key = -self.a["count"][ids].astype(np.float64)
        elif sort == "max":
            key = -self.a["max"][ids].astype(np.float64)
        elif sort == "id":
            return ids.tolist()
        else:
            raise InputError(f"features sort by density, max or id, not {sort!r}")
        return ids[np.argsort(key, kind="stable")].tolist()

    def _check(self, f: int) -> int:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or not 0 <= int(f) < self.width:
            raise InputError(f"feature {f!r} is not one of this SAE's 0 to {self.width - 1}")
        return int(f)

    def example_tokens(self, f: int) -> list[str]:
        """The example tokens of feature f, strongest first (as written, '##' kept)."""
        out = []
        for slot in range(TOP_EXAMPLES):
            if self.a["top_act"][f, slot] > 0:
                sid = int(self.a["top_sid"][f, slot])
                ids = self._sentence_ids(sid)
                out.append(self._tokens[int(ids[int(self.a["top_pos"][f, slot])])])
        return out

    def label(self, f: int) -> str:
        """Its most frequent example tokens, e.g. "cat / dog / bird"; "(silent)" for a dead one."""
        words = [_clean_token(t) for t in self.example_tokens(self._check(f))]
        if not words:
            return "(silent)"
        return " / ".join(w for w, _ in Counter(words).most_common(LABEL_TOKENS))

    def _sentence_ids(self, sid: int) -> np.ndarray:
        k = int(np.searchsorted(self.a["sent_key"], sid))
        lo, hi = self.a["sent_offset"][k], self.a["sent_offset"][k + 1]
        return self.a["sent_token_ids"][lo:hi]

    def summary(self, f: int) -> FeatureSummary:
        f = self._check(f)
        examples = []
        for slot in range(TOP_EXAMPLES):
            act = float(self.a["top_act"][f, slot])
            if act <= 0:
                break
            sid, pos = int(self.a["top_sid"][f, slot]), int(self.a["top_pos"][f, slot])
            ids = self._sentence_ids(sid)
            lo, hi = self.a["ex_offset"][f * TOP_EXAMPLES + slot], self.a["ex_offset"][f * TOP_EXAMPLES + slot + 1]
            examples.append(Example(sid, self._sentences[sid], [self._tokens[int(i)] for i in ids], pos, act,
                                    self.a["ex_acts"][lo:hi].astype(float).tolist()))
        aligned = [(self._tokens[int(i)], float(c)) for i, c in zip(self.a["aligned_ids"][f], self.a["aligned_cos"][f])]
        promoted = None
        if "promoted_ids" in self.a:
            promoted = [(self._tokens[int(i)], float(v)) for i, v in
                        zip(self.a["promoted_ids"][f], self.a["promoted_logit"][f])]
        return FeatureSummary(f, self.label(f), self.density(f), float(self.a["max"][f]), examples,
                              (self.a["hist_edges"].copy(), self.a["hist"][f].copy()), aligned, promoted)

    def find(self, word: str) -> list[tuple[int, float]]:
        """(feature, its strongest activation on ``word``) for the features with ``word`` among
        their top examples ('##' and case ignored), strongest first."""
        want = _clean_token(word.strip())
        if not want:
            raise InputError("give a word to find the features that fire on it")
        hits = {}
        top_act, top_sid, top_pos = self.a["top_act"], self.a["top_sid"], self.a["top_pos"]
        for f, slot in zip(*np.nonzero(top_act > 0)):
            ids = self._sentence_ids(int(top_sid[f, slot]))
            if _clean_token(self._tokens[int(ids[int(top_pos[f, slot])])]) == want:
                hits[int(f)] = max(hits.get(int(f), 0.0), float(top_act[f, slot]))
        return sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))

    # -- on disk ---------------------------------------------------------------------------
    def save(self, folder) -> None:
        from safetensors.numpy import save
        folder = Path(folder)
        atomic_write(folder / INDEX_FILE, save({k: np.ascontiguousarray(v) for k, v in self.a.items()}))
        atomic_write(folder / INDEX_JSON, json.dumps(self.info).encode())

    @classmethod
    def load(cls, folder) -> FeatureIndex:
        """The index of the SAE in ``folder``; one InputError when it is missing, damaged or of
        other weights than the folder's SAE now."""
        folder = Path(folder)
        redo = "build it again over a corpus"
        if not (folder / INDEX_JSON).is_file() or not (folder / INDEX_FILE).is_file():
            raise InputError(f"{folder} has no feature index yet: {redo}")
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
        try:
            info = json.loads((folder / INDEX_JSON).read_text(encoding="utf-8"))
            arrays = load_file(str(folder / INDEX_FILE))
        except (OSError, ValueError, SafetensorError) as e:
            raise InputError(f"the feature index in {folder} cannot be read ({e}): {redo}") from None
        if not isinstance(info, dict) or info.get("format") != FORMAT:
            raise InputError(f"the feature index in {folder} is of another format: {redo}")
        try:
            if info["sae_sha256"] != sae_sha256(folder):
                raise InputError(f"the feature index in {folder} was built for other SAE weights: {redo}")
            index = cls(arrays, info)
            _validate(index)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            if isinstance(e, InputError):
                raise
            raise InputError(f"the feature index in {folder} is damaged ({e}): {redo}") from None
        return index


def _validate(index: FeatureIndex) -> None:
    a, w = index.a, index.width
    want = {"max": (w,), "hist": (w, HIST_BINS), "hist_edges": (HIST_BINS + 1,),
            "top_act": (w, TOP_EXAMPLES), "top_sid": (w, TOP_EXAMPLES), "top_pos": (w, TOP_EXAMPLES),
            "ex_offset": (w * TOP_EXAMPLES + 1,), "aligned_ids": (w, TOP_VOCAB), "aligned_cos": (w, TOP_VOCAB)}
    for name, shape in want.items():
        if tuple(a[name].shape) != shape:
            raise ValueError(f"{name} has shape {a[name].shape}, not {shape}")
    for name in ("max", "top_act", "aligned_cos", "ex_acts"):
        if not np.isfinite(a[name]).all():
            raise ValueError(f"{name} holds NaN or infinite values")
    if a["ex_offset"][-1] != len(a["ex_acts"]) or a["sent_offset"][-1] != len(a["sent_token_ids"]):
        raise ValueError("offsets past their arrays")
    if not set(np.unique(a["top_sid"][a["top_act"] > 0]).tolist()) <= set(a["sent_key"].tolist()):
        raise ValueError("an example's sentence is missing")
    used = set(a["sent_token_ids"].tolist()) | set(a["aligned_ids"].ravel().tolist())
    if "promoted_ids" in a:
        used |= set(a["promoted_ids"].ravel().tolist())
    if not used <= set(index._tokens):
        raise ValueError("a token id has no text")


def hist_edges(meta: SaeMeta) -> np.ndarray:
    typical = max(meta.scale, 1e-12) * math.sqrt(meta.d_in)
    return np.geomspace(1e-3 * typical, 10 * typical, HIST_BINS + 1).astype(np.float32)


def build_feature_index(model, sae: SparseAutoencoder, meta: SaeMeta, sentences, folder, progress=None,
                        should_stop=None, batch_size: int = 64) -> FeatureIndex:
    """Run the corpus through the model and the SAE; keep what the browser shows; save it into
    ``folder`` (the SAE's) and return it. progress(done, total, note); should_stop() -> True
    ends it with Cancelled (nothing written)."""
    from core.features.saved import check_model
    check_model(meta, model)
    sentences = list(sentences)
    if not sentences:
        raise InputError("no sentences to browse the features on")
    device = model.device
    sae = sae.to(device)
    width, n_top = sae.width, TOP_EXAMPLES
    edges = hist_edges(meta)
    log_lo, log_span = math.log(float(edges[0])), math.log(float(edges[-1] / edges[0]))
    count = torch.zeros(width, dtype=torch.long, device=device)
    peak = torch.zeros(width, device=device)
    hist = torch.zeros(width * HIST_BINS, dtype=torch.long, device=device)
    top_act = torch.zeros(n_top, width, device=device)
    top_sid = torch.full((n_top, width), -1, dtype=torch.long, device=device)
    top_pos = torch.zeros(n_top, width, dtype=torch.long, device=device)
    n_tokens, done_sentences = 0, 0
    total = len(sentences)
    for batch in iter_activations(model, sentences, meta.site, batch_size, should_stop=should_stop):
        with torch.inference_mode():
            codes = sae.encode(batch.acts.to(device))
        n_tokens += len(codes)
        nz_rows, nz_f = codes.nonzero(as_tuple=True)
        vals = codes[nz_rows, nz_f]
        count += torch.bincount(nz_f, minlength=width)
        peak = torch.maximum(peak, codes.max(0).values)
        bins = ((vals.log() - log_lo) / log_span * HIST_BINS).floor().clamp(0, HIST_BINS - 1).long()
        hist += torch.bincount(nz_f * HIST_BINS + bins, minlength=width * HIST_BINS)
        cand, rows = codes.topk(min(n_top, len(codes)), dim=0)
        all_act = torch.cat([top_act, cand])
        all_sid = torch.cat([top_sid, batch.sentence_ids.to(device)[rows]])
        all_pos = torch.cat([top_pos, batch.positions.to(device)[rows]])
        best = all_act.topk(n_top, dim=0).indices
        top_act, top_sid, top_pos = all_act.gather(0, best), all_sid.gather(0, best), all_pos.gather(0, best)
        done_sentences = max(done_sentences, int(batch.sentence_ids.max()) + 1 if len(batch.sentence_ids) else 0)
        if progress is not None:
            progress(min(done_sentences, total), total, "reading the corpus")
    top_act = top_act.T.contiguous().cpu().numpy()
    top_sid = top_sid.T.contiguous().cpu().numpy()
    top_pos = top_pos.T.contiguous().cpu().numpy()
    top_sid[top_act <= 0] = -1
    arrays = {"count": count.cpu().numpy(), "max": peak.cpu().numpy().astype(np.float32),
              "hist": hist.view(width, HIST_BINS).cpu().numpy(), "hist_edges": edges,
              "top_act": top_act.astype(np.float32), "top_sid": top_sid, "top_pos": top_pos}
    arrays.update(_example_sentences(model, sae, meta, sentences, top_act, top_sid, should_stop))
    arrays.update(_vocabulary(model, sae, peak.cpu()))
    ids_used = set(arrays["sent_token_ids"].tolist()) | set(arrays["aligned_ids"].ravel().tolist())
    if "promoted_ids" in arrays:
        ids_used |= set(arrays["promoted_ids"].ravel().tolist())
    ids_sorted = sorted(ids_used)
    texts = model.tokenizer.convert_ids_to_tokens(ids_sorted)
    info = {"format": FORMAT, "sae_sha256": sae_sha256(folder), "site": meta.site, "n_tokens": n_tokens,
            "n_sentences": len(sentences), "corpus_sha256": _corpus_hash(sentences),
            "tokens": {str(i): t for i, t in zip(ids_sorted, texts)},
            "sentences": {str(int(s)): sentences[int(s)] for s in arrays["sent_key"]}}
    index = FeatureIndex(arrays, info)
    _validate(index)
    index.save(folder)
    return index


def _corpus_hash(sentences) -> str:
    from core.features.train import corpus_hash
    return corpus_hash(sentences)


def _example_sentences(model, sae, meta, sentences, top_act, top_sid, should_stop) -> dict:
    """Token ids of every example sentence, and each example's activations of its feature over
    its sentence (every token, [CLS] and [SEP] included, 0 where silent)."""
    keys = np.unique(top_sid[top_act > 0])
    subset = [sentences[int(s)] for s in keys]
    ids, _ = model.encode_ids(subset) if subset else ([], [])
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(x) for x in ids])
    width, n_top = top_act.shape
    wanted: dict[int, list] = {}                    # example sentence's local row -> [(feature, slot)]
    where = {int(s): i for i, s in enumerate(keys)}
    for f, slot in zip(*np.nonzero(top_act > 0)):
        wanted.setdefault(where[int(top_sid[f, slot])], []).append((int(f), int(slot)))
    pieces: dict = {}                               # (feature, slot) -> activations over the sentence
    sae_device = sae.W_enc.device
    for batch in iter_activations(model, subset, meta.site, 64, include_special=True, should_stop=should_stop):
        with torch.inference_mode():
            codes = sae.encode(batch.acts.to(sae_device)).cpu().numpy()
        sid = batch.sentence_ids.cpu().numpy()
        pos = batch.positions.cpu().numpy()
        for local in np.unique(sid):
            rows = np.flatnonzero(sid == local)
            feats = wanted[int(local)]
            t = np.zeros((len(ids[local]), len(feats)), dtype=np.float32)
            t[pos[rows]] = codes[rows][:, [f for f, _ in feats]]
            # specials are in the run (positions line up) but a feature is not shown firing there
            t[0] = t[-1] = 0
            for j, key in enumerate(feats):
                pieces[key] = t[:, j]
    ex_offset = np.zeros(width * n_top + 1, dtype=np.int64)
    lengths = np.zeros(width * n_top, dtype=np.int64)
    for (f, slot), v in pieces.items():
        lengths[f * n_top + slot] = len(v)
    ex_offset[1:] = np.cumsum(lengths)
    ex_acts = np.zeros(int(ex_offset[-1]), dtype=np.float32)
    for (f, slot), v in pieces.items():
        ex_acts[ex_offset[f * n_top + slot]:ex_offset[f * n_top + slot + 1]] = v
    flat_ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in ids]) if ids else np.zeros(0, np.int64)
    return {"sent_key": keys.astype(np.int64), "sent_offset": offsets, "sent_token_ids": flat_ids,
            "ex_offset": ex_offset, "ex_acts": ex_acts}


def _vocabulary(model, sae, peak: torch.Tensor) -> dict:
    """Per feature: the TOP_VOCAB tokens whose input embeddings have the highest cosine with its
    decoder direction; with an MLM head, the tokens whose logits rise most when the direction at
    its strongest activation is added to the decoder bias and read through the head (a logit lens
    at the site: a middle layer's reading is rough)."""
    from core.intervene.apply import encoder_of
    encoder = encoder_of(model)
    emb = encoder.embeddings.word_embeddings.weight.detach().float()
    tokens = model.tokenizer.convert_ids_to_tokens(list(range(emb.shape[0])))
    # special and unused tokens ([CLS], [unused17]) are nobody's meaning
    skip = torch.tensor([t.startswith("[") and t.endswith("]") for t in tokens], device=emb.device)
    unit = emb / emb.norm(dim=1, keepdim=True).clamp_min(1e-12)
    dec = sae.W_dec.detach().float().to(emb.device)
    out_ids, out_cos = [], []
    head = getattr(getattr(model, "model", None), "head", None) if getattr(model, "has_mlm", False) else None
    prom_ids, prom_val = [], []
    with torch.inference_mode():
        if head is not None:
            b = sae.b_dec.detach().float().to(emb.device)
            base = head(encoder.normalise_layer(b[None, None]))[0, 0].float()
        for start in range(0, sae.width, 256):
            d = dec[start:start + 256]
            cos = (d @ unit.T).masked_fill(skip, float("-inf"))
            c, i = cos.topk(TOP_VOCAB, dim=1)
            out_ids.append(i.cpu())
            out_cos.append(c.cpu())
            if head is not None:
                a = peak[start:start + 256].to(emb.device).clamp_min(1e-3)[:, None]
                h = (b + a * d)[None]
                delta = (head(encoder.normalise_layer(h))[0].float() - base).masked_fill(skip, float("-inf"))
                v, j = delta.topk(TOP_VOCAB, dim=1)
                prom_ids.append(j.cpu())
                prom_val.append(v.cpu())
    got = {"aligned_ids": torch.cat(out_ids).numpy().astype(np.int64),
           "aligned_cos": torch.cat(out_cos).numpy().astype(np.float32)}
    if head is not None:
        got["promoted_ids"] = torch.cat(prom_ids).numpy().astype(np.int64)
        got["promoted_logit"] = torch.cat(prom_val).numpy().astype(np.float32)
    return got


def token_features(model, sae: SparseAutoencoder, meta: SaeMeta, text: str, top: int = 5) -> list:
    """[(token, [(feature, activation), ...strongest first, at most ``top``])] for every token of
    ``text`` ([CLS] and [SEP] included, with their features: the model computes them too)."""
    from core.features.saved import check_model
    check_model(meta, model)
    ids, _ = model.encode_ids([text])
    tokens = model.tokenizer.convert_ids_to_tokens(ids[0])
    out = [(t, []) for t in tokens]
    for batch in iter_activations(model, [text], meta.site, 1, include_special=True):
        with torch.inference_mode():
            codes = sae.to(batch.acts.device).encode(batch.acts)
        v, i = codes.topk(min(top, sae.width), dim=1)
        for row, p in enumerate(batch.positions.tolist()):
            out[p] = (tokens[p], [(int(f), float(a)) for f, a in zip(i[row], v[row]) if a > 0])
    return out

