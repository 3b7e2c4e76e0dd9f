"""The Intervene tab's worker side (no Qt): each function runs in app/gui/workers.py's pool, enters
``intervene`` on its own thread (the hooks are thread-confined) and returns plain results.

    effects_fn(backend, EffectsRequest, progress=, cancel=) -> Effects       # one sentence: fast
    metrics_fn(backend, spec, progress=, cancel=) -> list[MetricEffect]      # shipped pairs/queries
    ranking_fn(backend, store, query, spec, progress=, cancel=) -> RankingChanges
    map_fn(backend, metric, seed, progress=, cancel=) -> ImportanceMap
    head_means(backend, progress, cancel) -> (L, H, Dh), cached per model
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from app.gui.panels.model_calls import asked, ours, said
from app.gui.wording import model_label
from core.errors import Cancelled, InputError
from core.intervene import effects as E
from core.intervene.spec import Intervention

_means: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # backend -> (weights sha, means)
_means_lock = threading.Lock()


def head_means(backend, progress=None, cancel=None):
    """Each head's mean output over the sample corpus, what mean ablation puts in its place;
    computed once per loaded model (one pass over the corpus)."""
    from core.intervene.means import mean_head_outputs
    key = getattr(backend, "weights_sha256", "")
    with _means_lock:
        held = _means.get(backend)
    if held is not None and held[0] == key:
        return held[1]
    means = mean_head_outputs(backend, E.sample_corpus(), progress=said(progress, "Mean head outputs"),
                              cancel=asked(cancel))
    with _means_lock:
        _means[backend] = (key, means)
    return means


def means_for(backend, spec: Intervention, progress=None, cancel=None):
    """The means ``spec`` needs (mean ablation of some heads), else None."""
    return head_means(backend, progress, cancel) if spec.heads and spec.head_mode == "mean" else None


def explain_intervened(backend, text, pair, layer, head, pooling, intervention, progress=None, cancel=None,
                       patch_from=None):
    """Step by step with ``intervention`` applied on both sides (core.walkthrough.steps.explain);
    its patches followed from ``patch_from`` (core.walkthrough.patched.PatchFrom)."""
    from core.walkthrough.steps import explain
    means = None if intervention is None else means_for(backend, intervention, progress, cancel)
    return explain(backend, text, pair=pair, layer=layer, head=head, pooling=pooling,
                   intervention=intervention, means=means, patch_from=patch_from)


@dataclass(frozen=True)
class EffectsRequest:
    text: str                          # sentence A: the one whose views are shown
    spec: Intervention                 # without patch sites (those come from ``sites``)
    masked: str = ""                   # a sentence with [MASK] for fill-mask ('' or no head: skipped)
    target: str = ""                   # the token whose probability at the first mask is followed
    text_b: str = ""                   # patching: the sentence the numbers come from
    sites: tuple = ()                  # patching: sites as typed, e.g. ("L2.H3", "L1.resid@cat")
    top_k: int = 5


@dataclass
class Effects:
    request: EffectsRequest
    spec: Intervention                 # what ran: the request's spec with its resolved patch sites
    attention: E.AttentionEffect
    vector: E.VectorEffect
    fill: E.FillMaskEffect | None = None
    fill_note: str = ""                # why fill-mask is not shown, if it is not
    alignment: object = None           # core.intervene.patching.Alignment when patching
    model: str = ""
    notes: list = field(default_factory=list)
    toward_b: E.TowardB | None = None   # patching: how far A's vector moved toward B's


def resolve_patch(backend, request: EffectsRequest, means):
    """(spec with resolved sites, patch source, alignment) for the request's patching, or the
    request's own spec and Nones when it patches nothing. Refusals are InputError."""
    if not request.sites:
        return request.spec, None, None
    from core.intervene.patching import patched_run
    from core.intervene.spec import parse_site
    if not request.text_b.strip():
        raise InputError("patching takes its numbers from sentence B: type sentence B, or clear the sites")
    sites = [parse_site(s) for s in request.sites]
    spec, source, alignment, _ = patched_run(backend, request.text, request.text_b, sites,
                                             request.spec.without_patch(), means)
    return spec, source, alignment


def effects_fn(backend, request: EffectsRequest, progress=None, cancel=None) -> Effects:
    """Before | after of the attentions, the sentence vector and fill-mask for one sentence."""
    ours(backend)
    if not request.text.strip():
        raise InputError("type a sentence to see what the intervention changes")
    means = means_for(backend, request.spec, progress, cancel)
    spec, source, alignment = resolve_patch(backend, request, means)
    _step(progress, cancel, 1, "Attentions")
    attention = E.compare_attentions(backend, request.text, spec, means, source)
    _step(progress, cancel, 2, "Sentence vector")
    vector = E.compare_vector(backend, request.text, spec, means=means, source=source)
    toward_b = None if source is None else E.toward_b(backend, vector, request.text_b)
    fill, fill_note = None, ""
    masked = request.masked.strip()
    mask = getattr(backend.tokenizer, "mask_token", None)
    if not backend.has_mlm:
        fill_note = (f"{model_label(backend.model_name)} has no masked-LM head, so it cannot fill a [MASK]: "
                     "inspect a model with one (a BERT/DistilBERT folder, or one trained in the Train tab with "
                     "the Masked-LM objective)")
    elif not masked or not mask or mask not in masked:
        fill_note = f"type a sentence with {mask or '[MASK]'} to see the guesses change"
    elif source is not None:
        fill_note = "fill-mask is not patched: the patch sites align to sentence A, not to the masked sentence"
        spec_fill = spec.without_patch()
        _step(progress, cancel, 3, "Fill-mask")
        fill = E.compare_fill_mask(backend, masked, spec_fill, request.top_k, request.target.strip() or None, means)
    else:
        _step(progress, cancel, 3, "Fill-mask")
        fill = E.compare_fill_mask(backend, masked, spec, request.top_k, request.target.strip() or None, means)
    return Effects(request, spec, attention, vector, fill, fill_note, alignment, backend.model_name,
                   toward_b=toward_b)


def metrics_fn(backend, spec: Intervention, progress=None, cancel=None) -> list:
    """Spearman on the shipped pairs, recall@10 and MRR of the shipped queries over the sample
    corpus, before | after. Patch sites belong to one sentence and are left out here."""
    ours(backend)
    spec = spec.without_patch()
    if spec.is_empty:
        raise InputError("switch something off first: the metrics compare the model with and without it")
    means = means_for(backend, spec, progress, cancel)
    spearman = E.compare_pairs(backend, spec, means=means, progress=said(progress, "Spearman on the shipped pairs"),
                               cancel=cancel)
    recall, mrr = E.compare_queries(backend, spec, means=means,
                                    progress=said(progress, "recall@10 on the shipped queries"), cancel=cancel)
    return [spearman, recall, mrr]


def ranking_fn(backend, store, query: str, spec: Intervention, k: int = 10, progress=None, cancel=None):
    """Which of the store's hits for ``query`` move, and by how many places, when only the query
    is embedded under the intervention (the store's vectors stay as they are)."""
    from index.corpus.intervene_ranking import ranking_changes
    ours(backend)
    if store is None:
        raise InputError("open a corpus first (File > Open corpus folder…): the ranking is the store's")
    if not query.strip():
        raise InputError("type a query to see how its ranking moves")
    spec = spec.without_patch()
    means = means_for(backend, spec, progress, cancel)
    return ranking_changes(store, backend, query, spec, k=k, means=means)


def map_fn(backend, metric: str, seed: int, cache_dir=None, progress=None, cancel=None):
    """The importance map (core.intervene.importance), cached on disk per model, metric, corpus, seed."""
    from core.intervene.importance import importance_map
    ours(backend)
    return importance_map(backend, metric, seed=seed, cache_dir=cache_dir,
                          progress=said(progress, f"Importance map ({metric})"), cancel=asked(cancel))


def _step(progress, cancel, done: int, message: str) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("intervention effects cancelled")
    if progress is not None:
        progress(done, 3, message)
