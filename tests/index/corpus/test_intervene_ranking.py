"""The store ranking under an intervention (index/corpus/intervene_ranking.py, `ablate --store`): against
a brute-force NumPy ranking of the store's own vectors with the intervened query vector, and
refused when the store was built by another model."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.encoder.backends import get_backend
from core.intervene.apply import intervene
from core.intervene.effects import sample_corpus
from core.intervene.spec import NOTHING, Intervention
from index.corpus.door import create_corpus, ingest, open_corpus
from index.corpus.intervene_ranking import ranking_changes
from index.store.errors import ModelMismatch, StoreNotFound
from tests.support.tiny_models import one_error, run_cli

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"
OTHER = "random:dim=32,layers=2,heads=4,ffn=64,seed=4"
QUERY = "a man is playing a guitar on the street"
# a random model's vectors are mostly its embeddings: positions off moves the query enough
# that hits enter and leave the top 10 (heads alone barely move it)
HEAVY = Intervention(heads={(0, 0)}, positions="off")
HEAVY_ARGS = ["--heads", "1.1", "--no-positions"]


@pytest.fixture(scope="module")
def tiny():
    return get_backend(RANDOM, "scratch", device="cpu")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory, tiny):
    path = tmp_path_factory.mktemp("ranking") / "s"
    store = create_corpus(str(path), tiny, "mean", index="flat")
    ingest(store, sample_corpus()[:120], tiny)
    store.close()
    return str(path)


def brute_force(store_path, vector):
    """Rank (1 = best) of every stored id by cosine with `vector`, ties by id."""
    store = open_corpus(store_path)
    try:
        ids, vectors = store.vectors()
    finally:
        store.close()
    q = vector / np.linalg.norm(vector)
    scores = vectors.astype(np.float64) @ q.astype(np.float64)
    order = sorted(range(len(ids)), key=lambda i: (-round(scores[i], 6), ids[i]))
    return {int(ids[i]): r for r, i in enumerate(order, 1)}, {int(ids[i]): float(scores[i]) for i in order}


def test_ranks_are_the_brute_force_ranks_of_the_intervened_query(tiny, store_path):
    k = 10
    r = ranking_changes(store_path, tiny, QUERY, HEAVY, k=k)
    clean = tiny.embed([QUERY], pooling="mean")[0]
    with intervene(tiny, HEAVY):
        hurt = tiny.embed([QUERY], pooling="mean")[0]
    ranks_before, _ = brute_force(store_path, clean)
    ranks_after, scores_after = brute_force(store_path, hurt)
    assert [h.rank_after for h in r.hits] == list(range(1, k + 1))
    top_after = sorted(ranks_after, key=ranks_after.get)[:k]
    assert [h.id for h in r.hits] == top_after
    for h in r.hits + r.left:
        assert h.rank_before == ranks_before[h.id]          # 120 texts: every rank is within the depth
        assert h.rank_after == ranks_after[h.id]
        assert h.moved == ranks_before[h.id] - ranks_after[h.id]
    for h in r.hits:
        assert h.score_after == pytest.approx(scores_after[h.id], abs=1e-5)
    top_before = set(sorted(ranks_before, key=ranks_before.get)[:k])
    assert {h.id for h in r.left} == top_before - set(top_after)
    assert {h.id for h in r.entered} == set(top_after) - top_before
    assert r.left and r.entered, "the intervention should change the top 10 (else this test proves little)"
    assert r.cosine == pytest.approx(float(np.dot(clean, hurt) / np.linalg.norm(clean) / np.linalg.norm(hurt)))


def test_no_intervention_changes_nothing(tiny, store_path):
    r = ranking_changes(store_path, tiny, QUERY, NOTHING, k=5)
    assert r.unchanged and not r.left and not r.entered
    assert all(h.moved == 0 for h in r.hits) and r.cosine == pytest.approx(1.0)


def test_ranks_deeper_than_the_depth_are_none(tiny, store_path):
    r = ranking_changes(store_path, tiny, QUERY, HEAVY, k=10, depth=12)
    assert r.depth == 12
    beyond = [h for h in r.hits + r.left if h.rank_before is None or h.rank_after is None]
    assert beyond and all(h.moved is None for h in beyond)


def test_a_store_of_another_model_is_refused(store_path):
    other = get_backend(OTHER, "scratch", device="cpu")
    with pytest.raises(ModelMismatch):
        ranking_changes(store_path, other, QUERY, HEAVY)


def test_no_store_is_refused(tiny, tmp_path):
    with pytest.raises(StoreNotFound):
        ranking_changes(str(tmp_path / "none"), tiny, QUERY, HEAVY)


def test_ablate_store_json_and_text(capsys, tiny, store_path):
    code, out, err = run_cli(["ablate", QUERY, *HEAVY_ARGS,
                              "--store", store_path, "-k", "5", "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)["ranking"]
    want = ranking_changes(store_path, tiny, QUERY, HEAVY, k=5).to_dict()
    assert [h["id"] for h in d["hits"]] == [h["id"] for h in want["hits"]]
    assert [h["rank_before"] for h in d["hits"]] == [h["rank_before"] for h in want["hits"]]
    assert d["left"] == want["left"] and d["k"] == 5
    code, out, err = run_cli(["ablate", QUERY, *HEAVY_ARGS,
                              "--store", store_path, "-k", "5"], capsys)
    assert code == 0, err
    assert "only the query is embedded with the parts off" in out
    first = want["hits"][0]
    assert f"{first['text']}" in out and "left the top 5:" in out


def test_ablate_store_with_another_model_is_one_error(capsys, store_path):
    code, out, err = run_cli(["ablate", QUERY, "--heads", "1.1", "--store", store_path, "--model", OTHER], capsys)
    message = one_error(code, err)
    assert "leave out --model" in message
    code, out, err = run_cli(["ablate", QUERY, "--heads", "1.1", "--store", store_path, "--model", OTHER,
                              "--pooling", "cls"], capsys)
    assert "leave out --pooling" in one_error(code, err)


def test_ablate_without_a_store_is_one_error_naming_the_ingest(capsys, tmp_path):
    code, out, err = run_cli(["ablate", QUERY, "--heads", "1.1", "--store", str(tmp_path / "none"),
                              "--model", RANDOM], capsys)
    message = one_error(code, err)
    assert f"there is no store at {tmp_path / 'none'}" in message and "encoderscope ingest FILE --store" in message


def test_a_whitened_store_ranks_in_its_own_space(tiny, tmp_path):
    """The query goes through the store's whitening, as its search does: brute force there."""
    from index.corpus.door import create_whitened_corpus
    from index.store.base import normalize
    store, _ = create_whitened_corpus(str(tmp_path / "w"), tiny, "mean", sample_corpus()[:80], dims=16,
                                      index="flat")
    try:
        r = ranking_changes(store, tiny, QUERY, HEAVY, k=5)
        ids, vectors = store.vectors()
        with intervene(tiny, HEAVY):
            q = store.whitening.apply(normalize(tiny.embed([QUERY], pooling="mean")))[0]
    finally:
        store.close()
    scores = vectors.astype(np.float64) @ q
    want = [int(ids[i]) for i in sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:5]]
    assert [h.id for h in r.hits] == want


# ---- importance over a store: recall of the clean model's own top 10 --------------------------

def agreement_by_hand(backend, texts, spec, queries=25, k=10):
    """The metric computed plainly: embed() clean and inside the intervention, top k by NumPy."""
    from core.intervene.apply import intervene as hooked
    clean = backend.embed(texts, pooling="mean")
    with hooked(backend, spec):
        hurt = backend.embed(texts, pooling="mean")

    def top(v):
        sims = v[:queries].astype(np.float64) @ v[queries:].astype(np.float64).T
        return [set(np.argsort(-row, kind="stable")[:k]) for row in sims]
    return float(np.mean([len(a & b) for a, b in zip(top(clean), top(hurt))]) / k)


def mrr_by_hand(backend, texts, spec, queries=25):
    """MRR of each query's clean top hit under the intervention, by NumPy on embed()'s vectors."""
    from core.intervene.apply import intervene as hooked
    clean = backend.embed(texts, pooling="mean")
    with hooked(backend, spec):
        hurt = backend.embed(texts, pooling="mean")
    sims = lambda v: v[:queries].astype(np.float64) @ v[queries:].astype(np.float64).T  # noqa: E731
    best = np.argsort(-sims(clean), axis=1, kind="stable")[:, 0]
    order = np.argsort(-sims(hurt), axis=1, kind="stable")
    return float(np.mean([1.0 / (1 + int(np.nonzero(row == b)[0][0])) for row, b in zip(order, best)]))


def test_store_mrr_is_the_clean_top_hits_rank_measured_plainly(tiny, store_path):
    from core.intervene.importance import measure
    from index.corpus.intervene_ranking import store_sample
    texts = store_sample(store_path, 100, seed=0)
    assert measure(tiny, "mrr", Intervention(), texts=texts) == 1.0
    assert measure(tiny, "mrr", HEAVY, texts=texts) == pytest.approx(mrr_by_hand(tiny, texts, HEAVY), abs=1e-9)
    assert mrr_by_hand(tiny, texts, HEAVY) < 0.99


@pytest.mark.slow          # ~30 s on 2 loaded cores: a map, its floors and four plain re-measurements
def test_importance_over_a_store_is_the_agreement_measured_plainly(tiny, store_path, tmp_path):
    from core.intervene.importance import importance_map, measure
    from index.corpus.intervene_ranking import store_sample
    texts = store_sample(store_path, 100, seed=0)
    assert len(texts) == 100 and texts == store_sample(store_path, 100, seed=0)
    assert texts != store_sample(store_path, 100, seed=1)
    m = importance_map(tiny, "recall", texts=texts, cache_dir=tmp_path)
    assert m.baseline == 1.0 and "own top 10: 25 queries over 75 other texts" in m.measured
    (l, h), drop = m.top(1)[0]
    assert drop > 0, "some head should matter on this sample (else the test proves little)"
    spec = Intervention(heads={(l, h)})
    assert 1.0 - measure(tiny, "recall", spec, texts=texts) == pytest.approx(drop, abs=1e-9)
    assert 1.0 - agreement_by_hand(tiny, texts, spec) == pytest.approx(drop, abs=1e-9)
    assert m.ffn[0] == pytest.approx(1.0 - agreement_by_hand(tiny, texts, Intervention(ffn_off={0})), abs=1e-9)
    # cached per sample: the same texts read back, another sample is another map
    assert importance_map(tiny, "recall", texts=texts, cache_dir=tmp_path).heads.tolist() == m.heads.tolist()
    importance_map(tiny, "recall", texts=store_sample(store_path, 100, seed=1), cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.safetensors"))) == 2


def test_importance_store_cli(capsys, store_path):
    code, out, err = run_cli(["importance", "--metric", "recall", "--store", store_path, "--sample", "100",
                              "--no-cache", "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["store"] == store_path and d["model"] == RANDOM and d["baseline"] == 1.0
    assert "own top 10" in d["measured"]
    code, out, err = run_cli(["importance", "--metric", "spearman", "--store", store_path], capsys)
    assert "--metric mrr, recall or mlm" in one_error(code, err)
    code, out, err = run_cli(["importance", "--metric", "recall", "--store", store_path, "--sample", "20"], capsys)
    assert "--sample must be at least 25" in one_error(code, err)


def test_ablate_and_importance_on_an_empty_store_say_it_is_empty(capsys, tmp_path):
    """Issue 49: an empty store is named as empty, with the ingest that fills it."""
    path = str(tmp_path / "empty")
    create_corpus(path, get_backend(RANDOM, "scratch", device="cpu"), "mean", index="flat").close()
    code, out, err = run_cli(["ablate", QUERY, "--heads", "1.1", "--store", path, "--model", RANDOM], capsys)
    message = one_error(code, err)
    assert f"the store at {path} is empty" in message and "encoderscope ingest FILE" in message
    code, out, err = run_cli(["importance", "--metric", "mlm", "--store", path, "--model", RANDOM], capsys)
    message = one_error(code, err)
    assert f"the store at {path} is empty" in message and "encoderscope ingest FILE" in message
