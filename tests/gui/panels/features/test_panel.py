"""The Features tab on a tiny SAE trained here on a tiny model: Train writes the SAE (SAELens's files)
and opens it, the list and a feature are core.features' own (FeatureIndex.load from disk), find by a
word, Cancel keeps a checkpoint that Train resumes, an SAE of another model is refused, the quality
table is the report's; and the SAE in the other views: Step by step's tokens, Why's shared features,
the Map's per-sentence values (brute force over the saved weights)."""
from __future__ import annotations

import numpy as np

from tests.gui.panels.features.conftest import SETTINGS, switch_model
from tests.support.feature_models import hidden_after, tiny_corpus


def configure(panel, folder, corpus, **changes):
    s = {**SETTINGS, **changes}
    bar = panel.bar
    for box, key in ((bar.width_box, "width"), (bar.k_box, "k"), (bar.tokens_box, "tokens"),
                     (bar.batch_box, "batch"), (bar.seed_box, "seed")):
        box.setValue(s[key])
    bar.source_box.setCurrentIndex(bar.source_box.findData("file"))
    bar.file.setText(str(corpus))
    bar.folder.setText(str(folder))


def outcome(qtbot, panel, signal, start):
    """What ``signal`` carries once ``start()`` has run, or a failure with the panel's message."""
    got = []
    signal.connect(got.append)
    panel.failed.connect(got.append)
    start()
    qtbot.waitUntil(lambda: bool(got), timeout=120_000)
    assert not isinstance(got[0], str), got[0]
    return got[0]


def train(qtbot, panel, folder, corpus, **changes):
    """Train as the button does; the opened SAE (an error fails at once, with its message)."""
    configure(panel, folder, corpus, **changes)
    got = []
    panel.opened.connect(got.append)
    panel.failed.connect(got.append)
    assert panel.train()
    qtbot.waitUntil(lambda: bool(got), timeout=180_000)
    assert not isinstance(got[0], str), got[0]
    return got[0]


def test_train_writes_the_sae_and_browses_core_s_index(qtbot, make_panel, models, corpus_file, tmp_path):
    from core.features.browse import FeatureIndex
    from core.features.saved import load_sae
    panel = make_panel(models[0])
    assert panel.bar.site.text() == "L2.resid"          # the middle of 3 layers
    assert panel.bar.width_box.value() == 8 * models[0].dim
    folder = tmp_path / "sae"
    with qtbot.waitSignal(panel.rows_shown, timeout=180_000) as rows:
        opened = train(qtbot, panel, folder, corpus_file)
    assert (folder / "sae_weights.safetensors").is_file() and (folder / "cfg.json").is_file()
    sae, meta = load_sae(folder)
    assert (meta.width, meta.k, meta.site) == (64, 4, "L2.resid") and meta.tokens_trained >= 3000
    index = FeatureIndex.load(folder)                   # what is on disk, not the worker's object
    assert [r.feature for r in rows.args[0]] == list(index.features(sort="density", filter_dead=True))
    assert opened is panel.current.opened
    first = rows.args[0][0]
    with qtbot.waitSignal(panel.feature_shown, timeout=30_000) as shown:
        panel.show_feature(first.feature)
    summary = shown.args[0]
    want = index.summary(first.feature)
    assert summary.feature == first.feature and summary.label == want.label == first.label
    assert [e.sentence_id for e in summary.top_examples] == [e.sentence_id for e in want.top_examples]
    page = panel.feature_view.examples.toHtml()
    top = want.top_examples[0]
    assert top.tokens[top.position].replace("#", "") in page
    edges, counts = want.histogram
    assert np.array_equal(panel.feature_view.bars.opts["height"], np.asarray(counts, float))
    assert panel.feature_view.vocab.rowCount() == len(want.vocab_aligned)
    assert panel.feature_view.promoted.rowCount() == len(want.promoted or [])   # the tiny model has an MLM head


def test_sort_and_find_by_a_word_list_core_s_features(qtbot, make_panel, models, trained):
    panel = make_panel(models[0])
    with qtbot.waitSignal(panel.opened, timeout=60_000):
        assert panel.open_folder(trained.folder)
    index = trained.index
    lists = panel.feature_list
    with qtbot.waitSignal(panel.rows_shown, timeout=30_000) as sig:
        lists.sort.setCurrentIndex(lists.sort.findData("max"))
    assert [r.feature for r in sig.args[0]] == list(index.features(sort="max", filter_dead=True))
    with qtbot.waitSignal(panel.rows_shown, timeout=30_000) as sig:
        lists.filter_dead.setChecked(False)
    assert [r.feature for r in sig.args[0]] == list(index.features(sort="max", filter_dead=False))
    word = trained.index.summary(sig.args[0][0].feature).top_examples[0].tokens[0]
    lists.word.setText(word)
    with qtbot.waitSignal(panel.rows_shown, timeout=30_000) as sig:
        lists.word.returnPressed.emit()
    assert [r.feature for r in sig.args[0]] == [f for f, _ in index.find(word)]


def test_cancel_keeps_a_checkpoint_that_train_resumes(qtbot, make_panel, models, corpus_file, tmp_path):
    panel = make_panel(models[0])
    folder = tmp_path / "sae"
    configure(panel, folder, corpus_file, tokens=20_000)       # ~10 s: Cancel lands long before the end
    assert panel.train()
    job = panel.state.jobs.get("features.train")
    with qtbot.waitSignal(job.progress, timeout=60_000):
        pass
    assert panel.bar.cancel_button.isEnabled()
    with qtbot.waitSignal(panel.cancelled, timeout=60_000) as sig:
        panel.bar.cancel_button.click()
    assert sig.args == ["features.train"]
    assert "resumes" in panel.bar.message.text()
    assert panel.current.opened is None and panel.bar.train_button.isEnabled()
    assert any(folder.iterdir())                         # the checkpoint stays on disk
    opened = train(qtbot, panel, folder, corpus_file, tokens=20_000)    # the same run, to its end
    assert opened.meta.tokens_trained >= 20_000


def test_an_sae_of_another_model_is_refused_and_a_switch_closes_it(qtbot, make_panel, models, trained):
    panel = make_panel(models[1])
    with qtbot.waitSignal(panel.failed, timeout=60_000) as sig:
        panel.open_folder(trained.folder)
    assert panel.current.opened is None
    assert sig.args[0] in panel.bar.message.text() or sig.args[0].replace("'", "&#x27;") in panel.bar.message.text()
    panel2 = make_panel(models[0])
    with qtbot.waitSignal(panel2.opened, timeout=60_000):
        panel2.open_folder(trained.folder)
    switch_model(panel2.state, models[1])
    assert panel2.current.opened is None
    assert "was closed" in panel2.bar.message.text()
    assert panel2.feature_list.model.rowCount() == 0


def test_the_quality_table_is_the_report(qtbot, make_panel, models, trained):
    from core.features.quality import evaluate_sae
    from core.intervene.effects import sample_corpus
    panel = make_panel(models[0])
    with qtbot.waitSignal(panel.opened, timeout=60_000):
        panel.open_folder(trained.folder)
    with qtbot.waitSignal(panel.quality_shown, timeout=180_000) as sig:
        assert panel.evaluate()
    report = sig.args[0]
    want = evaluate_sae(models[0], trained.sae, trained.meta, sample_corpus())
    table = panel.quality_view.table
    assert table.rowCount() == len(want.rows) == len(report.rows)
    for r, row in enumerate(want.rows):
        assert table.item(r, 0).text() == row.name
        assert table.item(r, 1).text() == f"{float(row.value):.4g}"
        assert table.item(r, table.columnCount() - 1).text() == row.better     # as the CLI's last column
    dead, half = (next(r for r, row in enumerate(want.rows) if row.name == name)
                  for name in ("dead fraction", "dead at n/2 tokens"))
    assert table.item(dead, 2).text() == f"each < {want.rows[dead].bound:.4g}"       # the rule of three
    lo, hi = want.rows[half].interval
    assert table.item(half, 2).text() == f"{lo:.4g} – {hi:.4g}"


# ---- the SAE in the other views ---------------------------------------------------------------------
def codes_numpy(folder, acts: np.ndarray) -> np.ndarray:
    """TopK codes from the saved weights, in NumPy, as SAELens reads cfg.json (not the SAE's code)."""
    import json

    from safetensors.numpy import load_file
    w = {name: v.astype(np.float64) for name, v in load_file(str(folder / "sae_weights.safetensors")).items()}
    cfg = json.loads((folder / "cfg.json").read_text())
    k = int(cfg["k"])
    x = acts - w["b_dec"] if cfg["apply_b_dec_to_input"] else acts
    pre = x @ w["W_enc"] + w["b_enc"]
    codes = np.zeros_like(pre)
    top = np.argsort(-pre, axis=1)[:, :k]
    np.put_along_axis(codes, top, np.maximum(np.take_along_axis(pre, top, axis=1), 0), axis=1)
    return codes


def residual(models, text: str, specials: bool = False) -> np.ndarray:
    """The residual stream after block 2 (L2.resid) at the text's tokens ([CLS]/[SEP] only with
    ``specials``): transformers' BertModel."""
    ids = models[0].encode_ids([text])[0][0]
    h = hidden_after(models[2], list(ids), 1).float().numpy()
    return h if specials else h[1:-1]


def test_step_by_step_lists_each_token_s_top_features(qtbot, models, trained):
    from app.gui.current_features import current_features
    from app.gui.panels.features.token_view import TokenFeaturesView
    from app.gui.state import AppState
    state = AppState()
    try:
        view = TokenFeaturesView(state)
        qtbot.addWidget(view)
        switch_model(state, models[0])
        text = tiny_corpus(3, seed=5)[0]
        current_features(state).set(trained)
        with qtbot.waitSignal(view.shown, timeout=30_000) as sig:
            view.show_for(text)
        per_token = sig.args[0]
        codes = codes_numpy(trained.folder, residual(models, text, specials=True))
        assert len(per_token) == len(codes)
        for (_token, pairs), row in zip(per_token, codes):
            top = [f for f, _ in pairs]
            assert top == [int(f) for f in np.argsort(-row, kind="stable")[:len(top)]]
            np.testing.assert_allclose([a for _, a in pairs], row[top], atol=1e-4)
        assert view.isVisible() or not view.parent()
        assert f"#{per_token[0][1][0][0]}" in view.label.text()
    finally:
        state.shutdown(10_000)


def test_why_shows_the_features_both_sentences_fire_on(qtbot, models, trained):
    from app.gui.current_features import current_features
    from app.gui.panels.features.shared_view import SharedFeaturesView
    from app.gui.state import AppState
    state = AppState()
    try:
        view = SharedFeaturesView(state)
        qtbot.addWidget(view)
        switch_model(state, models[0])
        current_features(state).set(trained)
        query, hit = tiny_corpus(2, seed=5)
        with qtbot.waitSignal(view.shown, timeout=30_000) as sig:
            view.show_for(query, hit)
        q = codes_numpy(trained.folder, residual(models, query)).max(axis=0)
        h = codes_numpy(trained.folder, residual(models, hit)).max(axis=0)
        both = np.flatnonzero((q > 0) & (h > 0))
        want = sorted(both.tolist(), key=lambda f: -min(q[f], h[f]))[:8]
        assert [s.feature for s in sig.args[0]] == want
        np.testing.assert_allclose([s.query for s in sig.args[0]], q[want], atol=1e-4)
    finally:
        state.shutdown(10_000)


def test_map_values_are_each_sentence_s_largest_activation(models, trained):
    import threading

    from app.gui.panels.features import compute as C
    texts = tiny_corpus(6, seed=9)
    feature = int(trained.index.features(sort="density")[0])
    values = C.sentence_values_fn(models[0], trained, texts, feature, cancel=threading.Event())
    want = [codes_numpy(trained.folder, residual(models, t))[:, feature].max() for t in texts]
    np.testing.assert_allclose(values, want, atol=1e-4)


def steered_vector(models, folder, text: str, feature: int, alpha: float) -> np.ndarray:
    """transformers' BertModel with alpha x the feature's decoder row added after block 2 at every token,
    mean-pooled over every token and made unit: the steered query, without core.features."""
    import torch
    from safetensors.numpy import load_file
    direction = torch.tensor(load_file(str(folder / "sae_weights.safetensors"))["W_dec"][feature])
    ref = models[2]
    hook = ref.encoder.layer[1].register_forward_hook(
        lambda _m, _i, out: (out[0] + alpha * direction,) + tuple(out[1:]) if isinstance(out, tuple)
        else out + alpha * direction)
    try:
        ids = torch.tensor([models[0].encode_ids([text])[0][0]])
        with torch.no_grad():
            h = ref(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
    finally:
        hook.remove()
    v = h.mean(dim=0).double().numpy()
    return v / np.linalg.norm(v)


def test_steering_a_feature_moves_the_hits_as_a_hooked_transformers_model_does(qtbot, make_panel, models,
                                                                               corpus_file, trained):
    panel = make_panel(models[0])
    bar = panel.bar
    bar.source_box.setCurrentIndex(bar.source_box.findData("file"))
    bar.file.setText(str(corpus_file))
    with qtbot.waitSignal(panel.opened, timeout=60_000):
        panel.open_folder(trained.folder)
    feature = int(trained.index.features(sort="density")[0])
    with qtbot.waitSignal(panel.feature_shown, timeout=30_000):
        panel.show_feature(feature)
    query = trained.index.summary(feature).top_examples[0].sentence
    assert panel.edit_box.query.text() == query              # a sentence the feature fires on, to start
    panel.edit_box.alpha.setValue(6.0)
    result = outcome(qtbot, panel, panel.edit_shown, panel.edit_box.steer_button.click)
    texts = corpus_file.read_text(encoding="utf-8").splitlines()
    vectors = models[0].embed(texts)
    after = np.argsort(-(vectors.astype(np.float64) @ steered_vector(models, trained.folder, query, feature, 6.0)),
                       kind="stable")[:10]
    assert [h.text for h in result.hits] == [texts[i] for i in after]
    before = np.argsort(-(vectors @ models[0].embed([query])[0]), kind="stable")[:10]
    assert {h.text for h in result.left} == {texts[i] for i in before} - {texts[i] for i in after}
    assert result.cosine < 0.9999                            # steering moved the query
    table = panel.edit_box.table
    assert table.rowCount() == len(result.hits) + len(result.left)
    assert table.item(0, 3).text() == texts[after[0]]


def test_steering_over_the_open_corpus_ranks_its_stored_vectors(qtbot, make_panel, models, corpus_file, trained,
                                                                 tmp_path):
    from index.corpus.door import open_corpus
    from tests.support.app_fixtures import build_store
    texts = corpus_file.read_text(encoding="utf-8").splitlines()
    store = open_corpus(build_store(tmp_path / "store", models[0], texts))
    panel = make_panel(models[0])
    try:
        panel.state.store = store
        with qtbot.waitSignal(panel.opened, timeout=60_000):
            panel.open_folder(trained.folder)
        feature = int(trained.index.features(sort="density")[0])
        with qtbot.waitSignal(panel.feature_shown, timeout=30_000):
            panel.show_feature(feature)
        query = texts[3]
        panel.edit_box.query.setText(query)
        panel.edit_box.query.textEdited.emit(query)
        panel.edit_box.alpha.setValue(6.0)
        result = outcome(qtbot, panel, panel.edit_shown, panel.edit_box.steer_button.click)
        vectors = models[0].embed(texts)
        after = np.argsort(-(vectors.astype(np.float64) @ steered_vector(models, trained.folder, query, feature, 6.0)),
                           kind="stable")[:10]
        assert [h.text for h in result.hits] == [texts[i] for i in after]
        assert result.query == query and "feature" in result.intervention
    finally:
        store.close()


def test_the_edit_summary_counts_each_moved_hit_once(qtbot):
    from types import SimpleNamespace as NS

    from app.gui.panels.features.edit_view import EditBox

    def move(before, after, text):
        return NS(rank_before=before, rank_after=after, text=text,
                  moved=None if before is None or after is None else before - after)
    hits = [move(1, 1, "a"), move(3, 2, "b"), move(None, 3, "c"), move(12, 4, "d")]
    changes = NS(query="q", cosine=0.9, k=4, hits=hits, left=[move(2, None, "e"), move(4, None, "f")],
                 entered=[hits[2], hits[3]])
    box = EditBox()
    qtbot.addWidget(box)
    box.show_changes(7, "ablate", 0.0, changes)
    assert "3 of the top 4 moved, 2 entered, 2 left" in box.summary.text()
    assert [box.table.item(r, 2).text() for r in range(6)] == ["=", "+1", "new", "+8", "–", "–"]


def test_the_map_colours_its_sentences_by_a_feature_and_back(qtbot, models, trained):
    from app.gui.current_features import current_features
    from app.gui.panels.features.map_colour import FeatureColouring
    from app.gui.panels.map.plot import MapPlot
    from app.gui.state import AppState
    state = AppState()
    try:
        colour = FeatureColouring(state)
        plot = MapPlot()
        qtbot.addWidget(colour)
        qtbot.addWidget(plot)
        colour.values_ready.connect(plot.set_values)
        texts = tiny_corpus(12, seed=3)
        plot.set_points(np.random.default_rng(0).normal(size=(12, 2)), np.arange(12) % 3, ["a", "b", "c"])
        colour.set_texts(texts)
        assert colour.isHidden()                              # no SAE open
        switch_model(state, models[0])
        current_features(state).set(trained)
        assert not colour.isHidden()
        feature = int(trained.index.features(sort="density")[0])
        colour.feature.setValue(feature)
        with qtbot.waitSignal(colour.values_ready, timeout=30_000) as sig:
            colour.on.setChecked(True)
        want = np.array([codes_numpy(trained.folder, residual(models, t))[:, feature].max() for t in texts])
        np.testing.assert_allclose(sig.args[0], want, atol=1e-4)
        rows = np.sort(np.concatenate([item.rows for item in plot.value_items]))
        assert rows.tolist() == list(range(12)) and not any(i.isVisible() for i in plot.cluster_items)
        strongest = max(plot.value_items, key=lambda i: i.zValue())
        assert int(np.argmax(want)) in strongest.rows.tolist()
        with qtbot.waitSignal(colour.values_ready, timeout=5_000) as sig:
            colour.on.setChecked(False)
        assert sig.args[0] is None and not plot.value_items and all(i.isVisible() for i in plot.cluster_items)
        switch_model(state, models[1])                        # another model: the SAE does not fit, hidden
        assert colour.isHidden()
    finally:
        state.shutdown(10_000)


def test_step_by_step_shows_the_token_features_of_the_sentence_it_walks(qtbot, make_walkthrough_panel, models,
                                                                         trained):
    from app.gui.current_features import current_features
    walk = make_walkthrough_panel(models[0])
    assert walk.token_features.isHidden()                     # no SAE open: nothing of it shown
    current_features(walk.state).set(trained)
    text = tiny_corpus(3, seed=11)[1]
    with qtbot.waitSignal(walk.token_features.shown, timeout=60_000) as sig:
        walk.explain_text(text)
    assert [t for t, _ in sig.args[0]] == walk.walkthrough.tokens
    assert walk.token_features.isVisible() and "L2.resid" in walk.token_features.title()
