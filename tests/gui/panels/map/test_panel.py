"""The Map tab (app/gui/panels/map/panel.py, app/gui/panels/map/plot.py): draws every sentence by cluster, hover and
click pick the right sentence (real mouse events on known points), lasso = brute force, the
search's hits and query on the map, recompute on corpus change, exports."""
from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from app.gui.corpus_jobs import SearchResult
from app.gui.panels.map.panel import MapPanel
from app.gui.panels.map.plot import inside_polygon, nearest_row
from app.gui.state import AppState
from index.faiss.store import VectorStore
from index.map.corpus_map import build_map, read_map_csv, read_vectors
from index.store.base import Hit
from tests.support.app_fixtures import wait_idle
from tests.support.store_backends import FakeBackend, clustered

D = 32
N = 400


@pytest.fixture
def store(tmp_path):
    backend = FakeBackend(dim=D)
    s = VectorStore.open(tmp_path / "s", writable=True, create=True,
                         fingerprint=backend.fingerprint("mean"))
    s.add([f"sentence number {i}, about topic {i % 7}" for i in range(N)], clustered(N, D, seed=1))
    s.save()
    yield s
    s.close()


@pytest.fixture
def panel(qtbot, store):
    state = AppState()
    state.backend = FakeBackend(dim=D)
    p = MapPanel(state)
    qtbot.addWidget(p)
    p.resize(1100, 700)
    state.store = store
    with qtbot.waitSignal(p.map_shown, timeout=60_000):
        p.show()
    qtbot.waitUntil(lambda: p.plot.vb.viewPixelSize()[0] > 0, timeout=5_000)
    yield p
    state.jobs.shutdown(20_000)


def same_points(x, y, xy) -> bool:
    """The points (x, y) are the rows of xy, in any order."""
    got = np.column_stack([x, y]).astype(np.float64)
    want = np.asarray(xy, np.float64)
    return got.shape == want.shape and np.allclose(got[np.lexsort(got.T[::-1])],
                                                   want[np.lexsort(want.T[::-1])])


def view_pos(panel, row) -> QPoint:
    """Where row is drawn, in the plot widget's pixel coordinates."""
    return panel.plot.mapFromScene(panel.plot.scene_pos_of(row))


def isolated_row(panel) -> int:
    """The row farthest (in screen pixels) from every other point: unambiguous to point at."""
    px_w, px_h = panel.plot.vb.viewPixelSize()
    xy = panel.map.xy / np.array([px_w, px_h], np.float32)
    d = np.linalg.norm(xy[:, None, :] - xy[None, :, :], axis=2)
    np.fill_diagonal(d, np.inf)
    return int(d.min(axis=1).argmax())


def test_the_map_draws_every_sentence_by_cluster(panel, store):
    m = panel.map
    assert len(m) == N and panel.info.text().startswith(f"{N} sentences · PCA")
    items = panel.plot.cluster_items
    assert len(items) == len(m.clusters)
    assert sum(len(item) for item in items) == N
    for c, item in enumerate(items):                # each item holds exactly its cluster's points
        assert same_points(*item.getData(), m.xy[m.cluster == c])
    ref = build_map(store, clusters=8)              # the same map as the CLI computes
    assert np.array_equal(ref.cluster, m.cluster) and np.allclose(ref.xy, m.xy)


def test_hover_and_click_pick_the_sentence_under_the_pointer(panel, qtbot):
    row = isolated_row(panel)
    pos = view_pos(panel, row)
    with qtbot.waitSignal(panel.plot.hovered, check_params_cb=lambda r: r == row, timeout=3_000):
        QTest.mouseMove(panel.plot.viewport(), pos)
    assert panel.plot.tip.isVisible() and panel.plot.tip.textItem.toPlainText().replace("\n", " ") \
        == panel.map.texts[row]
    QTest.mouseClick(panel.plot.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert panel.selected_row == row
    assert panel.sentence.text().startswith(panel.map.texts[row])
    sx, sy = panel.plot.selected.getData()
    assert (sx[0], sy[0]) == pytest.approx(tuple(panel.map.xy[row]))
    assert panel.search_button.isEnabled() and panel.attention_button.isEnabled()

    with qtbot.waitSignal(panel.search_requested) as sig:
        panel.search_button.click()
    assert sig.args == [panel.map.texts[row]]
    with qtbot.waitSignal(panel.state.inspect_requested) as sig:
        panel.attention_button.click()
    assert sig.args == [panel.map.texts[row], ""]
    with qtbot.waitSignal(panel.state.walkthrough_requested) as sig:
        panel.walk_button.click()
    assert sig.args == [panel.map.texts[row]]

    corner = QPoint(panel.plot.width() - 3, panel.plot.height() - 3)   # empty space: deselects
    if panel.plot.row_at(panel.plot.mapToScene(corner)) < 0:
        QTest.mouseClick(panel.plot.viewport(), Qt.MouseButton.LeftButton, pos=corner)
        assert panel.selected_row == -1 and not panel.search_button.isEnabled()


def test_nearest_row_and_lasso_equal_brute_force():
    rng = np.random.default_rng(0)
    xy = rng.normal(size=(5000, 2)).astype(np.float32)
    for x, y in rng.normal(size=(20, 2)):
        want = int(np.argmin(((xy[:, 0] - x) / 0.01) ** 2 + ((xy[:, 1] - y) / 0.02) ** 2))
        assert nearest_row(xy, x, y, 0.01, 0.02, radius_px=1e9) == want
    assert nearest_row(xy, 50.0, 50.0, 0.01, 0.01) == -1
    tri = np.array([[-1.0, -1.0], [2.0, -0.5], [0.0, 1.5]])
    (a, b, c) = tri

    def side(p, q, r):
        return (q[0] - p[0]) * (r[:, 1] - p[1]) - (q[1] - p[1]) * (r[:, 0] - p[0])
    s1, s2, s3 = side(a, b, xy), side(b, c, xy), side(c, a, xy)
    want = np.flatnonzero(((s1 > 0) & (s2 > 0) & (s3 > 0)) | ((s1 < 0) & (s2 < 0) & (s3 < 0)))
    assert np.array_equal(np.sort(inside_polygon(xy, tri)), want)


def test_lasso_lists_the_sentences_inside(panel, qtbot):
    m = panel.map
    lo, hi = np.percentile(m.xy, 30, axis=0), np.percentile(m.xy, 60, axis=0)
    box = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    with qtbot.waitSignal(panel.plot.lassoed):
        panel.plot.lasso(box)
    inside = np.flatnonzero(np.all((m.xy > lo) & (m.xy < hi), axis=1))
    assert sorted(panel.lasso_rows.tolist()) == inside.tolist()
    listed = [panel.lasso_list.item(i).text() for i in range(panel.lasso_list.count())]
    assert sorted(listed) == sorted(m.texts[r] for r in inside)
    assert f"Selection: {len(inside)} sentences" in panel.lasso_label.text()
    assert same_points(*panel.plot.lassoed_marks.getData(), m.xy[inside])
    panel.plot.cluster_items[0].setVisible(False)    # hidden from the legend: not selectable
    panel.plot.lasso(box)
    assert panel.lasso_rows.tolist() == [r for r in inside.tolist() if m.cluster[r] != 0]
    hidden = int(np.flatnonzero(m.cluster == 0)[0])
    assert panel.plot.row_at(panel.plot.scene_pos_of(hidden)) != hidden


def test_lasso_drawn_with_the_mouse(panel, qtbot):
    panel.lasso_button.setChecked(True)
    vp = panel.plot.viewport()
    centre = view_pos(panel, 0)
    ring = [centre + QPoint(dx, dy) for dx, dy in ((-60, -60), (60, -60), (60, 60), (-60, 60),
                                                    (-60, -59))]
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, pos=ring[0])
    for start, end in itertools.pairwise(ring):
        for t in np.linspace(0, 1, 8)[1:]:
            QTest.mouseMove(vp, start + (end - start) * float(t))
            QTest.qWait(15)            # pyqtgraph drops moves faster than its mouseRateLimit
    with qtbot.waitSignal(panel.plot.lassoed, timeout=3_000):
        QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, pos=ring[-1])
    offsets = [view_pos(panel, r) - centre for r in range(len(panel.map))]
    inner = {r for r, o in enumerate(offsets) if abs(o.x()) < 55 and abs(o.y()) < 55}
    outer = {r for r, o in enumerate(offsets) if abs(o.x()) <= 61 and abs(o.y()) <= 61}
    got = set(panel.lasso_rows.tolist())
    assert 0 in got and inner <= got <= outer and len(inner) > 1


def test_search_hits_are_ringed_and_the_query_is_placed(panel, qtbot, store):
    m = panel.map
    hits = [Hit(0.9, int(m.ids[r]), m.texts[r]) for r in (3, 10, 42)]
    with qtbot.waitSignal(panel.state.jobs.busy_changed, check_params_cb=lambda b: not b,
                          timeout=10_000):
        panel.show_search(SearchResult("about topic 3", 3, hits, 1.0))
    assert same_points(*panel.plot.hits.getData(), m.xy[[3, 10, 42]])
    qtbot.waitUntil(lambda: len(panel.plot.query.getData()[0]) == 1, timeout=10_000)
    vec = FakeBackend(dim=D).embed(["about topic 3"])[0]
    want = m.projection.project(vec / np.linalg.norm(vec))[0]
    qx, qy = panel.plot.query.getData()
    assert (qx[0], qy[0]) == pytest.approx(tuple(want), abs=1e-5)


def test_recomputed_in_a_worker_when_the_corpus_changes(panel, qtbot, store):
    store.add(["a brand new sentence", "and another one"], clustered(2, D, seed=5))
    with qtbot.waitSignal(panel.map_shown, timeout=60_000):
        panel.state.corpus_changed.emit()
    assert len(panel.map) == N + 2 and "a brand new sentence" in panel.map.texts
    assert sum(len(item) for item in panel.plot.cluster_items) == N + 2


def test_empty_store_says_so(qtbot, tmp_path):
    backend = FakeBackend(dim=D)
    s = VectorStore.open(tmp_path / "e", writable=True, create=True,
                         fingerprint=backend.fingerprint("mean"))
    state = AppState()
    p = MapPanel(state)
    qtbot.addWidget(p)
    state.store = s
    p.show()
    qtbot.waitUntil(lambda: "no sentences" in p.info.text(), timeout=30_000)
    assert p.map is None
    state.jobs.shutdown(20_000)
    s.close()


def test_exports(panel, tmp_path, store):
    panel.export_csv(tmp_path / "m.csv")
    rows = read_map_csv(tmp_path / "m.csv")
    assert [r["id"] for r in rows] == panel.map.ids.tolist()
    assert [r["text"] for r in rows] == panel.map.texts
    panel.export_png(tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_build_map_job_can_be_cancelled(store):
    from app.gui.panels.map.panel import build_map_job
    from core.errors import Cancelled
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        build_map_job(store, "pca", 4, progress=lambda *a: None, cancel=cancel)


# ---- in the main window, with the real model --------------------------------------------------
def test_map_tab_in_the_window_follows_the_search(make_window, tiny_store_template, qtbot):
    w = make_window(tiny_store_template)
    mp = w.map_panel
    with qtbot.waitSignal(mp.map_shown, timeout=60_000):
        assert w.show_panel("Map")
    assert len(mp.map) == w.state.store.count() == 24
    w.show_panel("Search")
    with qtbot.waitSignal(w.search_panel.results_shown, timeout=30_000) as sig:
        w.search_panel.query.setText("a cup of coffee in the morning")
    hit_ids = [h.id for h in sig.args[0].hits]
    assert same_points(*mp.plot.hits.getData(), mp.map.xy[[mp.row_of[i] for i in hit_ids]])
    w.show_panel("Map")                       # the query is embedded when the tab shows
    qtbot.waitUntil(lambda: len(mp.plot.query.getData()[0]) == 1, timeout=30_000)
    qx, qy = mp.plot.query.getData()
    vec = w.state.backend.embed(["a cup of coffee in the morning"], pooling="mean")[0]
    want = mp.map.projection.project(vec / np.linalg.norm(vec))[0]
    assert (qx[0], qy[0]) == pytest.approx(tuple(want), abs=1e-4)

    mp.select_row(5)
    mp.search_button.click()                  # Search like this
    assert w.tabs.currentWidget() is w.search_panel
    assert w.search_panel.query.text() == mp.map.texts[5]
    wait_idle(qtbot, w)


def test_the_legend_names_every_cluster_past_twelve(qtbot):
    from app.gui.panels.map.plot import LEGEND_ROWS, MapPlot
    plot = MapPlot()
    qtbot.addWidget(plot)
    n = 30
    rng = np.random.default_rng(0)
    plot.set_points(rng.normal(size=(300, 2)), np.arange(300) % n, [f"cluster {c}" for c in range(n)])
    names = [label.text for _, label in plot.legend.items]
    assert names == [f"cluster {c}" for c in range(n)]
    assert plot.legend.columnCount == -(-n // LEGEND_ROWS)       # at most LEGEND_ROWS rows under the map


def test_the_tab_says_how_well_the_map_keeps_neighbours(panel, store):
    """Beside PCA's variance, the share of nearest neighbours kept (index/map/quality.py)."""
    from index.map.quality import neighbour_recall
    m = panel.map
    _, vectors, _ = read_vectors(store)
    want = neighbour_recall(vectors, m.xy)
    assert f"keeps {want.recall:.0%} of each sentence's 10 nearest neighbours" in panel.info.text()
    assert "of the variance" in panel.info.text()


def test_umap_is_the_default_where_installed_and_the_fallback_is_said(qtbot, monkeypatch):
    import importlib.util
    import sys

    from index.map.projection import METHOD_ENV
    monkeypatch.delenv(METHOD_ENV, raising=False)
    if importlib.util.find_spec("umap") is None:
        pytest.skip("umap-learn is not installed here")
    p = MapPanel(AppState())
    qtbot.addWidget(p)
    assert p.method.currentData() == "umap"
    monkeypatch.setitem(sys.modules, "umap", None)          # as if umap-learn were not installed
    p2 = MapPanel(AppState())
    qtbot.addWidget(p2)
    assert p2.method.currentData() == "pca" and not p2.method.model().item(1).isEnabled()
    from index.map.corpus_map import map_vectors
    x = clustered(60, D, seed=2)
    p2.set_map(map_vectors(np.arange(60), x, [f"t{i}" for i in range(60)], method="pca", clusters=3))
    assert "umap-learn is not installed" in p2.info.text() and "PCA" in p2.info.text()


def test_each_cluster_is_named_where_its_points_are(qtbot):
    from app.gui.panels.map.plot import MapPlot
    plot = MapPlot()
    qtbot.addWidget(plot)
    rng = np.random.default_rng(1)
    centres = np.array([[-5.0, 0.0], [5.0, 0.0], [0.0, 6.0]])
    cluster = np.arange(90) % 3
    xy = centres[cluster] + rng.normal(scale=0.5, size=(90, 2))
    plot.set_points(xy, cluster, ["cats", "cars", "cooking"])
    named = {label.textItem.toPlainText(): (label.pos().x(), label.pos().y()) for label in plot.cluster_labels}
    assert set(named) == {"cats", "cars", "cooking"}
    for c, name in enumerate(["cats", "cars", "cooking"]):
        np.testing.assert_allclose(named[name], np.median(xy[cluster == c], axis=0), atol=1e-5)
    plot.cluster_items[1].setVisible(False)            # hidden from the legend: its name goes too
    assert not plot.cluster_labels[1].isVisible() and plot.cluster_labels[0].isVisible()
