"""`map` with UMAP (the default) reports progress through its layout epochs and stops at a
cancel within an epoch, not after the whole fit: on the command line a progress line on stderr
and Ctrl-C ending it with one line (nothing written); in the app's Map tab a worker whose
progress names the epoch and whose Cancel ends the fit early."""
import threading

import pytest

from core.errors import Cancelled
from index.faiss.store import VectorStore
from index.map.corpus_map import build_map
from tests.support.store_backends import FakeBackend, clustered

pytest.importorskip("umap")
D = 16
N = 300


@pytest.fixture()
def store(tmp_path):
    backend = FakeBackend(dim=D)
    s = VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=backend.fingerprint("mean"))
    s.add([f"sentence number {i}, about topic {i % 5}" for i in range(N)], clustered(N, D, seed=3))
    s.save()
    yield s
    s.close()


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_umap_reports_its_epochs_and_a_cancel_stops_it_at_the_next_one(store):
    seen, cancel = [], threading.Event()

    def progress(done, total, message):
        seen.append((done, total, message))
        if "layout epoch" in message and done == 5:
            cancel.set()
    with pytest.raises(Cancelled):
        build_map(store, method="umap", progress=progress, cancel=cancel)
    epochs = [(d, t) for d, t, m in seen if "layout epoch" in m]
    assert epochs[-1][0] == 5 and epochs[-1][1] > 5, epochs[-3:]     # stopped within the fit
    assert not any(m.startswith("Clustering") for _, _, m in seen)


def test_the_cli_shows_progress_and_ctrl_c_ends_it_with_one_line(store, tmp_path, capsys, monkeypatch):
    from app.cli import main
    from app.cli.progress_line import ProgressLine
    seen = []
    real_update = ProgressLine.update
    monkeypatch.setattr(ProgressLine, "update",
                        lambda self, d, t, m: (seen.append((d, t, m)), real_update(self, d, t, m)))
    code = main(["map", "--store", str(store.folder), "--method", "umap"])
    out, err = capsys.readouterr()
    assert code == 0 and "Projecting 300 sentences (UMAP)" in err and "Clustering" in err, err
    last = [(d, t) for d, t, m in seen if "layout epoch" in m][-1]
    assert last[0] == last[1] > 0             # every epoch reported, up to the last

    import index.map.umap_epochs as epochs

    real = epochs.epoch_hook

    def interrupted_at_epoch_3(umap_module, progress=None, cancel=None):
        def with_ctrl_c(done, total):
            if done == 3:
                raise KeyboardInterrupt
            progress(done, total)
        return real(umap_module, with_ctrl_c, cancel)
    monkeypatch.setattr(epochs, "epoch_hook", interrupted_at_epoch_3)
    target = tmp_path / "map.csv"
    code = main(["map", "--store", str(store.folder), "--method", "umap", "--out", str(target)])
    out, err = capsys.readouterr()
    assert code == 130 and out == "" and "Traceback" not in err
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert said == [f"interrupted: no map was made and {target} was not written"], err
    assert not target.exists()


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_the_map_tab_shows_the_epochs_and_its_cancel_ends_the_fit(qtbot, store):
    from app.gui.panels.map.panel import MapPanel
    from app.gui.state import AppState
    state = AppState()
    state.backend = FakeBackend(dim=D)
    panel = MapPanel(state)
    qtbot.addWidget(panel)
    panel.method.setCurrentIndex(panel.method.findData("umap"))
    messages = []
    state.jobs.job_started.connect(lambda job: job.progress.connect(
        lambda d, t, msg: (messages.append((d, t, msg)), "layout epoch" in msg and d >= 1 and job.cancel())))
    state.store = store
    panel.show()
    qtbot.waitUntil(lambda: "cancelled" in panel.info.text(), timeout=30_000)
    epochs = [(d, t) for d, t, msg in messages if "layout epoch" in msg]
    assert epochs and epochs[-1][0] < epochs[-1][1], epochs[-3:]
    assert panel.map is None
    state.jobs.shutdown(20_000)
