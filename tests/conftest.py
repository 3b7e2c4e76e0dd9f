import gc
import os
import shutil
import tempfile
from pathlib import Path

# Qt aborts the process without a display; every test runs offscreen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The hub is unreachable here: never wait on it in a test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# The default precision is "auto" (bf16 where the CPU has it natively): CI machines differ, so
# the suite pins fp32 for numbers that must not depend on the CPU; tests/core/test_precision.py
# tests "auto" itself (it clears this variable).
os.environ["ENCODERSCOPE_PRECISION"] = "fp32"
# The map's default is UMAP (umap-learn: numba compiles for ~1 min on a first run); the suite
# pins PCA and tests the default itself (tests/index/map/test_quality.py clears this variable).
os.environ["ENCODERSCOPE_MAP_METHOD"] = "pca"
# Stores, settings, logs and the per-machine kernel-timing cache (core/machine_cache.py) of tests
# that choose no data folder go to a throw-away one, never the user's.
os.environ.setdefault("ENCODERSCOPE_DATA_DIR", tempfile.mkdtemp(prefix="encoderscope-tests-"))

import pytest  # noqa: E402

from tests.support.app_fixtures import ASSETS, build_store  # noqa: E402
from tests.support.tiny_models import make_tiny_distilbert  # noqa: E402


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory):
    """A tiny random DistilBertForMaskedLM + WordPiece vocab, saved as a real model folder."""
    return make_tiny_distilbert(tmp_path_factory.mktemp("tiny_distilbert"))


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 on our encoder (CPU, fp32 as pinned above): loaded once."""
    from core.encoder.backends import get_backend
    return get_backend("minilm", "scratch", device="cpu")


@pytest.fixture(scope="session")
def minilm_hf():
    """The same model under transformers (--backend hf)."""
    from core.encoder.backends import get_backend
    return get_backend("minilm", "hf", device="cpu")


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """A real Milvus standalone server (PyPI's `milvus` package) on 127.0.0.1, started once per
    test session; skipped, with the reason, only where that package cannot run."""
    from tests.support.milvus_server import LocalMilvus, why_cannot_run
    reason = why_cannot_run()
    if reason:
        pytest.skip(f"no Milvus server for the tests: {reason}")
    server = LocalMilvus(tmp_path_factory.mktemp("milvus-server"))
    try:
        server.start()
    except Exception as e:   # noqa: BLE001  (a start failure is a test failure, worded)
        server.kill()
        pytest.fail(f"the Milvus server from PyPI's `milvus` package did not start: {e}")
    yield server
    server.kill()     # a throw-away server: its graceful stop takes seconds


# The store contract on the real server: these run by default, the rest with -m slow (each
# server test creates collections, ~4 s apiece on the test server).
SERVER_CONTRACT_DEFAULT = {
    "test_exact_search_equals_numpy_cosine_ranking", "test_metadata_round_trip",
    "test_remove_count_iterate_get", "test_update_text", "test_reopen_same_results_ids_continue",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    cuda = [item for item in items if item.get_closest_marker("needs_cuda")]
    if cuda:
        import torch
        if not torch.cuda.is_available():
            skip = pytest.mark.skip(reason=f"needs_cuda: torch {torch.__version__} sees no CUDA GPU here")
            for item in cuda:
                item.add_marker(skip)
    import importlib.util
    if importlib.util.find_spec("pytestqt") is None:      # a bare GPU box: the app's tests cannot run
        no_qt = pytest.mark.skip(reason="needs pytest-qt and PySide6 (the desktop app's tests)")
        for item in items:
            if "qtbot" in getattr(item, "fixturenames", ()):
                item.add_marker(no_qt)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("store_kind") == "server" and item.originalname not in SERVER_CONTRACT_DEFAULT:
            item.add_marker(pytest.mark.slow)


# The tests whose renames and deletions must all work on Windows: none onto or of a file this
# process still holds open (tests/support/open_files_guard.py); test modules, as tests.<path>.
GUARDED = {"tests.index.store.test_contract", "tests.index.store.test_portable_locks",
           "tests.index.faiss.test_durability", "tests.index.faiss.test_store", "tests.index.faiss.test_torn",
           "tests.index.milvus.test_store", "tests.index.corpus.test_migrate_milvus",
           "tests.cli.test_store", "tests.cli.test_store_repair", "tests.cli.test_train", "tests.cli.test_whiten",
           "tests.core.train.test_train", "tests.core.train.test_runs", "tests.core.train.test_experiments",
           "tests.core.walkthrough.test_notebook_export", "tests.core.files.test_folder_lock_file"}


@pytest.fixture(autouse=True)
def thaw_after_each_test():
    """The CLI's bulk commands and the app freeze what is alive (core/long_lived.py), which a
    process of one command or one app ends anyway; tests run many in one process, so each
    starts with nothing frozen by the one before."""
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def no_rename_or_delete_of_open_files(request):
    if request.module.__name__ not in GUARDED:
        yield
        return
    from tests.support.open_files_guard import watch
    with watch() as found:
        yield
    assert not found, f"renamed onto or deleted while this process holds it open (Windows refuses): {found}"


@pytest.fixture
def run(capsys):
    """run("embed", "text", ...) -> (returncode, stdout, stderr) of `encoderscope ...` run in
    this process (the same parser and handlers as the console script, no new Python + torch)."""
    from types import SimpleNamespace

    from tests.support.tiny_models import run_cli

    def call(*args, check=True):
        rc, out, err = run_cli(args, capsys)
        if check:
            assert rc == 0, err
        return SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return call


# ---- the app tests: an isolated data folder, prebuilt stores, a window, a walkthrough panel ----
@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """ENCODERSCOPE_DATA_DIR -> a fresh tmp folder: stores, settings.ini and logs go there."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(folder))
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu")
    monkeypatch.delenv("ENCODERSCOPE_STORE", raising=False)
    return folder


@pytest.fixture(scope="session")
def sample_store_template(tmp_path_factory, minilm):
    """The bundled sample corpus, embedded once per test session with minilm (mean)."""
    return build_store(tmp_path_factory.mktemp("sample_template") / "sample", minilm)


@pytest.fixture(scope="session")
def tiny_store_template(tmp_path_factory, minilm):
    lines = (ASSETS / "sample_corpus.txt").read_text(encoding="utf-8").splitlines()[:24]
    return build_store(tmp_path_factory.mktemp("tiny_template") / "tiny", minilm, lines)


@pytest.fixture
def make_window(qtbot, data_dir):
    """make_window(template=None) -> a shown MainWindow on a copy of a template store, loaded."""
    windows = []

    def make(template: Path | None = None, start=True, wait=True):
        from app.gui.settings import stores_dir
        from app.gui.shell.main_window import MainWindow

        folder = stores_dir() / "sample"
        if template is not None and not folder.exists():
            shutil.copytree(template, folder)
        w = MainWindow()
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        if start:
            w.start(folder)
            if wait:
                qtbot.waitUntil(lambda: w.state.backend is not None and w.state.store is not None
                                and not w.state.jobs.busy, timeout=60_000)
        return w

    yield make
    for w in windows:
        if w.isVisible():
            w.close()
        w.state.jobs.shutdown(20_000)


@pytest.fixture
def make_walkthrough_panel(qtbot):
    """make(backend, width, height) -> a shown Step by step panel on its own AppState holding
    ``backend``, explaining nothing until asked; its jobs are shut down after the test."""
    from app.gui.panels.walkthrough.panel import WalkthroughPanel
    from app.gui.state import AppState

    states = []

    def make(backend, width=1200, height=800):
        state = AppState()
        states.append(state)
        panel = WalkthroughPanel(state, auto_explain=False)
        qtbot.addWidget(panel)
        panel.resize(width, height)
        panel.show()
        state.backend = backend
        state.backend_changed.emit(backend)
        return panel

    yield make
    for state in states:
        state.shutdown(10000)


@pytest.fixture
def opened():
    """Closes every store a test opened (Milvus Lite keeps a server per folder until then)."""
    stores = []
    yield stores
    for s in reversed(stores):
        try:
            s.close()
        except Exception:
            pass


@pytest.fixture(params=["faiss", "milvus", "server"])
def store_kind(request):
    """The store contract's implementation under test (tests/support/store_contract.py): a FAISS
    folder, Milvus Lite, or a collection on the session's Milvus server."""
    from tests.support.store_contract import SERVER, milvus_available
    if request.param != "faiss" and not milvus_available():
        pytest.skip("needs the [milvus] extra (pymilvus, milvus-lite)")
    if request.param == "server":
        SERVER["uri"] = request.getfixturevalue("milvus_server").uri
    return request.param
