"""The Features tab's worker side (no Qt): each function runs in app/gui/workers.py's pool and
returns core.features' plain results, the same the CLI prints.

    source = Sentences("corpus", store) | Sentences("sample") | Sentences("file", file=path)
    train_fn(backend, source, settings, folder)              -> OpenedSae (trained, indexed, opened)
    open_fn(backend, folder)                                 -> OpenedSae (the feature index, if built)
    index_fn(backend, opened, source)                        -> OpenedSae with its FeatureIndex
    rows_fn(index, sort, filter_dead, word)                  -> list[FeatureRow] for the feature list
    summary_fn(index, feature)                               -> core.features.browse.FeatureSummary
    quality_fn(backend, opened, source)                      -> core.features.quality.QualityReport
    sweep_fn(backend, opened, a, b)                          -> core.features.edit.FeatureSweep

``progress(done, total, message)`` and ``cancel`` (a threading.Event) come from the worker; core
asks ``should_stop()``, and a stop it honoured is raised as Cancelled here, so the job ends as
cancelled with the SAE's checkpoint on disk (Train again on the same folder resumes it).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.gui.current_features import OpenedSae
from core.errors import Cancelled, InputError

SOURCES = ("corpus", "sample", "file")


@dataclass(frozen=True)
class Sentences:
    """The sentences an SAE trains on and is browsed over: the open corpus, the sample corpus or a file
    (read in the worker: a large corpus never blocks the window)."""
    kind: str = "sample"          # one of SOURCES
    store: object = None          # the open store, for "corpus"
    file: str = ""                # for "file"

    def read(self) -> list[str]:
        if self.kind == "corpus":
            if self.store is None:
                raise InputError("no corpus is open: open one (File > Open corpus folder…) or choose the "
                                 "sample corpus")
            from index.corpus.door import read_rows
            return list(dict.fromkeys(t for t in read_rows(self.store)[1] if t.strip()))
        if self.kind == "file":
            if not self.file.strip():
                raise InputError("choose the text file the SAE trains on (one sentence a line, or .csv/.jsonl)")
            from index.corpus.door import read_training_corpus
            return read_training_corpus(Path(self.file))
        from core.intervene.effects import sample_corpus
        return sample_corpus()


def _stop(cancel):
    return (lambda: cancel.is_set()) if cancel is not None else (lambda: False)


def _stopped(cancel) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled()


def _said(progress, message: str):
    """core's progress(done, total, note) as the worker's, the note prefixed with what runs."""
    if progress is None:
        return None
    return lambda done, total=0, note="": progress(done, total, f"{message}: {note}" if note else message)


def train_fn(backend, source: Sentences, settings: dict, folder, progress=None, cancel=None) -> OpenedSae:
    """Train (or resume) an SAE into ``folder`` with ``settings`` (TrainConfig's fields), then build its
    feature index and open it. Cancel stops at the next step with a checkpoint: the same call resumes."""
    from core.features.saved import load_sae
    from core.features.train import TrainConfig, train_sae
    folder = Path(folder)
    if not str(folder).strip() or folder == Path():
        raise InputError("choose the folder the SAE is saved in")
    sentences = source.read()
    if not sentences:
        raise InputError("no sentence to train on")
    result = train_sae(backend, sentences, TrainConfig(**settings), folder,
                       progress=_said(progress, "Training the SAE"), should_stop=_stop(cancel))
    if not result.finished:       # stopped: the checkpoint is saved, the same call continues it
        raise Cancelled()
    sae, meta = load_sae(folder)
    return _indexed(backend, OpenedSae(folder, sae, meta), sentences, progress, cancel)


def open_fn(backend, folder, progress=None, cancel=None) -> OpenedSae:
    """The SAE saved in ``folder``, checked against ``backend``'s model, with its feature index if built."""
    from core.features.browse import FeatureIndex
    from core.features.saved import check_model, load_sae
    folder = Path(folder)
    sae, meta = load_sae(folder)
    if backend is not None:
        check_model(meta, backend)
    try:
        return OpenedSae(folder, sae, meta, FeatureIndex.load(folder))
    except InputError as e:       # none yet, damaged or stale: the SAE opens, Index features builds it
        return OpenedSae(folder, sae, meta, None, str(e))


def index_fn(backend, opened: OpenedSae, source: Sentences, progress=None, cancel=None) -> OpenedSae:
    """Build the feature browser's index over the sentences (saved in the SAE's folder)."""
    return _indexed(backend, opened, source.read(), progress, cancel)


def _indexed(backend, opened: OpenedSae, sentences: list[str], progress=None, cancel=None) -> OpenedSae:
    from core.features.browse import build_feature_index
    index = build_feature_index(backend, opened.sae, opened.meta, sentences, opened.folder,
                                progress=_said(progress, "Indexing features"), should_stop=_stop(cancel))
    _stopped(cancel)
    return OpenedSae(opened.folder, opened.sae, opened.meta, index)


@dataclass(frozen=True)
class FeatureRow:
    feature: int
    label: str
    density: float
    max_activation: float


def rows_fn(index, sort: str = "density", filter_dead: bool = True, word: str = "", progress=None,
            cancel=None) -> list[FeatureRow]:
    """The feature list: every feature (sorted, the dead ones left out), or those firing on ``word``."""
    if word.strip():
        features = [f for f, _ in index.find(word.strip())]
    else:
        features = index.features(sort=sort, filter_dead=filter_dead)
    rows = []
    for n, f in enumerate(features):
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        rows.append(FeatureRow(int(f), index.label(f), index.density(f), float(index.a["max"][f])))
        if progress is not None:
            progress(n + 1, len(features), "Listing features")
    return rows


def summary_fn(index, feature: int, progress=None, cancel=None):
    return index.summary(int(feature))


def quality_fn(backend, opened: OpenedSae, source: Sentences, progress=None, cancel=None):
    """The quality table on the held-out tokens, with intervals and floors."""
    from core.features.quality import evaluate_sae
    report = evaluate_sae(backend, opened.sae, opened.meta, source.read(), progress=_said(progress, "Quality"),
                          should_stop=_stop(cancel))
    _stopped(cancel)
    return report


# ---- the features in the other views (Step by step, Why, the Map) ------------------------------------
def token_features_fn(backend, opened: OpenedSae, text: str, top: int = 5, progress=None, cancel=None):
    """Each token of ``text`` with its ``top`` features at the SAE's site: [(token, [(feature, activation)])]."""
    from core.features.browse import token_features
    return token_features(backend, opened.sae, opened.meta, text, top=top)


def labels_of(opened: OpenedSae, features) -> dict[int, str]:
    """feature -> its short label ('' before the SAE's features are indexed)."""
    if opened.index is None:
        return {int(f): "" for f in features}
    return {int(f): opened.index.label(int(f)) for f in set(features)}


def labelled_token_features_fn(backend, opened: OpenedSae, text: str, top: int = 5, progress=None, cancel=None):
    """(token_features_fn's list, the labels of the features in it)."""
    per_token = token_features_fn(backend, opened, text, top)
    return per_token, labels_of(opened, [f for _t, pairs in per_token for f, _a in pairs])


def special_tokens(backend) -> set[str]:
    """The texts of [CLS], [SEP] and padding: what a sentence's features leave out."""
    from core.features.collect import special_ids
    return set(backend.tokenizer.convert_ids_to_tokens(special_ids(backend)))


def strongest(per_token, leave_out=frozenset()) -> dict[int, float]:
    """feature -> its largest activation over a sentence's tokens (token_features' result), the
    tokens in ``leave_out`` (the special ones) left out."""
    best: dict[int, float] = {}
    for token, pairs in per_token:
        if token in leave_out:
            continue
        for feature, value in pairs:
            best[int(feature)] = max(best.get(int(feature), 0.0), float(value))
    return best


@dataclass(frozen=True)
class SharedFeature:
    feature: int
    label: str
    query: float             # its largest activation on the query's tokens
    hit: float               # on the hit's


def shared_features_fn(backend, opened: OpenedSae, query: str, hit: str, top: int = 8, progress=None,
                       cancel=None) -> list[SharedFeature]:
    """The features both the query and the hit fire on (at a token other than [CLS]/[SEP]), the strongest
    in both first."""
    specials = special_tokens(backend)
    q = strongest(token_features_fn(backend, opened, query, top=opened.meta.k), specials)
    h = strongest(token_features_fn(backend, opened, hit, top=opened.meta.k), specials)
    both = sorted(set(q) & set(h), key=lambda f: -min(q[f], h[f]))[:top]
    labels = labels_of(opened, both)
    return [SharedFeature(f, labels[f], q[f], h[f]) for f in both]


def sentence_values_fn(backend, opened: OpenedSae, texts: list[str], feature: int, progress=None,
                       cancel=None):
    """Each sentence's largest activation of ``feature`` over its tokens ([CLS]/[SEP] left out; 0 where it
    never fires), the activations streamed in batches."""
    import numpy as np
    import torch

    from core.features.collect import iter_activations
    from core.features.saved import check_model
    check_model(opened.meta, backend)
    if not 0 <= int(feature) < int(opened.meta.width):
        raise InputError(f"feature {feature} is not one of this SAE's 0 to {opened.meta.width - 1}")
    values = np.zeros(len(texts), np.float32)
    done = 0
    for batch in iter_activations(backend, texts, opened.site, should_stop=_stop(cancel)):
        with torch.inference_mode():
            codes = opened.sae.to(batch.acts.device).encode(batch.acts)[:, int(feature)]
        ids = batch.sentence_ids.cpu().numpy()
        np.maximum.at(values, ids, codes.float().cpu().numpy())
        done = max(done, int(ids.max()) + 1 if ids.size else done)
        if progress is not None:
            progress(done, len(texts), f"Feature {feature} over the map")
    return values


# ---- ablate / steer a feature: which hits move -------------------------------------------------------
def the_edit(opened: OpenedSae, feature: int, mode: str, alpha: float):
    """core's FeatureEdit of one feature: switched off ("ablate") or pushed by ``alpha`` ("steer")."""
    from core.features.edit import FeatureEdit
    if mode == "ablate":
        return FeatureEdit(opened.sae, opened.site, ablate=frozenset({int(feature)}))
    return FeatureEdit(opened.sae, opened.site, steer={int(feature): float(alpha)})


def edit_fn(backend, opened: OpenedSae, feature: int, mode: str, alpha: float, query: str, store=None,
            source: Sentences | None = None, k: int = 10, progress=None, cancel=None):
    """``query``'s top ``k`` before and after the feature is ablated or steered in its forward pass, the
    searched vectors as the clean model made them: the open corpus's store (index's RankingChanges), or,
    with none open, the chosen sentences embedded here (core.features.edit.SteeredSearch)."""
    from core.features.edit import features_edited, sentence_vectors, steered_search
    from core.features.saved import check_model
    check_model(opened.meta, backend)
    if not query.strip():
        raise InputError("type a query: its hits before and after the edit are compared")
    edit = the_edit(opened, feature, mode, alpha)
    if store is not None:
        from index.corpus.intervene_ranking import edited_ranking_changes
        return edited_ranking_changes(store, backend, query, lambda: features_edited(backend, edit),
                                      edit.describe(), k=k)
    texts = (source or Sentences()).read()
    if not texts:
        raise InputError("no sentence to search")
    vectors = sentence_vectors(backend, texts)
    _stopped(cancel)
    return steered_search(backend, edit, query, vectors, texts, k=k)


# ---- the features sweep: which of A's features, set to B's values, move A toward B ---------------------
def sweep_fn(backend, opened: OpenedSae, a: str, b: str, progress=None, cancel=None):
    """core.features.edit.FeatureSweep of A and B (the one `encoderscope features sweep` prints), every
    feature active in either, the most toward B first; Cancel stops before the next batch of features."""
    from core.features.edit import features_sweep
    if not a.strip() or not b.strip():
        raise InputError("type both sentences: A runs, B's feature values are put into it")
    sweep = features_sweep(backend, opened.sae, opened.meta, a, b, progress=_said(progress, "Sweep"),
                           should_stop=_stop(cancel))
    _stopped(cancel)
    return sweep
