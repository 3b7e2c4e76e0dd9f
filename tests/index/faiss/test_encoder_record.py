"""A store records the encoder (backend and precision) that embedded its vectors, and `why --store`
and `search` run that encoder, or say in words which one they ran (index/store/base.py, app/cli)."""
from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support.tiny_models import run_cli

TEXTS = ["the cat sat on the mat .", "a dog ran to the river .", "the small bird sang ."]
QUERY = "a cat on a mat"


@pytest.fixture
def hf_store(tiny_distilbert, tmp_path, capsys):
    src = tmp_path / "corpus.txt"
    src.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    folder = tmp_path / "store"
    rc, _out, err = run_cli(["ingest", str(src), "--store", str(folder), "--model", str(tiny_distilbert),
                             "--backend", "hf", "--precision", "fp32", "--quiet"], capsys)
    assert rc == 0, err
    return folder


def forget_the_encoder(folder):
    """The store as Encoderscope wrote it before stores recorded their encoder."""
    from index.faiss.manifest import CHECKSUM_KEY, _self_checksum
    with sqlite3.connect(folder / "store.db") as db:
        db.execute("DELETE FROM meta WHERE key = 'encoders'")
    path = folder / "manifest.json"
    d = json.loads(path.read_text())
    d.pop("encoders")
    d.pop(CHECKSUM_KEY)
    d[CHECKSUM_KEY] = _self_checksum(d)
    path.write_text(json.dumps(d))


def test_the_manifest_and_the_store_record_the_encoder(hf_store):
    from index.faiss.store import VectorStore
    assert json.loads((hf_store / "manifest.json").read_text())["encoders"] == [{"backend": "hf", "precision": "fp32"}]
    with VectorStore.open(hf_store) as store:
        assert store.encoders == [{"backend": "hf", "precision": "fp32"}] and store.encoder_backend == "hf"


def test_why_with_a_store_runs_the_encoder_that_embedded_it(hf_store, capsys):
    rc, out, err = run_cli(["why", QUERY, TEXTS[0], "--store", hf_store, "--precision", "fp32", "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert res["backend"] == "hf" and res["encoder_note"] is None
    rc, out, err = run_cli(["why", QUERY, TEXTS[0], "--store", hf_store, "--precision", "fp32"], capsys)
    assert rc == 0 and "note:" not in err and "= the search score" in out


def test_why_says_when_it_runs_another_encoder(hf_store, capsys):
    rc, out, err = run_cli(["why", QUERY, TEXTS[0], "--store", hf_store, "--precision", "fp32",
                            "--backend", "scratch"], capsys)
    assert rc == 0, err
    assert "note: the store was embedded by the transformers encoder in fp32, this ran the scratch encoder" in err
    assert "leave out --backend (or give --backend hf)" in err


def test_a_store_that_does_not_record_it_is_read_and_says_so(hf_store, capsys):
    from index.faiss.store import VectorStore
    forget_the_encoder(hf_store)
    with VectorStore.open(hf_store) as store:
        assert store.encoders is None and store.encoder_backend is None
        assert store.count() == len(TEXTS)
    rc, out, err = run_cli(["why", QUERY, TEXTS[0], "--store", hf_store, "--precision", "fp32"], capsys)
    assert rc == 0, err
    assert "not recorded" in err and "this ran the scratch encoder" in err
    assert "give --backend hf here too" in err
    # the command the note suggests works, and runs that encoder
    rc, out, err = run_cli(["why", QUERY, TEXTS[0], "--store", hf_store, "--precision", "fp32",
                            "--backend", "hf", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["backend"] == "hf"


def test_search_runs_the_stores_encoder(hf_store, capsys, monkeypatch):
    import app.cli.store as cli_store
    ran = []
    real = cli_store.backend_for
    monkeypatch.setattr(cli_store, "backend_for", lambda args, model: ran.append(args.backend) or real(args, model))
    rc, out, err = run_cli(["search", QUERY, "--store", hf_store, "--precision", "fp32", "-k", "2"], capsys)
    assert rc == 0, err
    assert ran == ["hf"] and "note:" not in err
    rc, out, err = run_cli(["search", QUERY, "--store", hf_store, "--precision", "fp32", "--backend", "scratch"],
                           capsys)
    assert rc == 0 and ran[-1] == "scratch" and "this ran the scratch encoder" in err


def test_the_why_dialog_names_both_encoders_and_how_far_apart(qtbot, tiny_distilbert, tmp_path, monkeypatch):
    """A corpus embedded by transformers, explained by the from-scratch encoder (the app's Encoder
    switched, which keeps the corpus): the header says so, with digits that differ where they do."""
    import re

    from app.gui.panels.why.view import WhyDialog
    from app.gui.state import AppState
    from core.encoder.backends import get_backend
    from core.evaluate.why import SAME_SCORE
    from index.corpus.door import search
    from index.faiss.store import VectorStore
    hf = get_backend(str(tiny_distilbert), "hf", device="cpu", precision="fp32")
    scratch = get_backend(str(tiny_distilbert), "scratch", device="cpu", precision="fp32")
    store = VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=hf.fingerprint("mean"))
    store.add_texts(TEXTS, hf)
    hits, _ = search(store, QUERY, 1, hf)
    state = AppState()
    state.backend, state.store = scratch, store
    dialog = WhyDialog(state)
    qtbot.addWidget(dialog)
    try:
        off = hits[0].score + 3e-4          # as a bf16 search score of the other encoder can be
        with qtbot.waitSignal(dialog.shown, timeout=60_000) as sig:
            dialog.request(QUERY, hits[0].text, float(off))
        header = dialog.header.text()
        assert "the corpus was embedded by the transformers encoder in fp32; this is the from-scratch encoder " \
               "in fp32" in header
        m = re.search(r"score <b>([\d.]+)</b> ≠ the search score ([\d.]+) \(apart by ([\d.e+-]+)\)", header)
        assert m and m[1] != m[2] and abs(float(m[1]) - float(m[2])) > SAME_SCORE
        assert float(m[3]) == pytest.approx(abs(off - sig.args[0].total), rel=0.05)
        assert str(tiny_distilbert) not in header and tiny_distilbert.name in header
        state.backend = hf
        with qtbot.waitSignal(dialog.shown, timeout=60_000):
            dialog.request(QUERY, hits[0].text, float(hits[0].score))
        assert "embedded by" not in dialog.header.text() and "= the search score" in dialog.header.text()
    finally:
        state.shutdown(10_000)
        store.close()


def test_ingest_quiet_says_truncation_once(tiny_distilbert, tmp_path, capsys, caplog):
    """Three embedding windows of over-long texts: one line for all, not one per window."""
    from index.store.adding import EMBED_WINDOW
    words = "the cat sat on the mat and the dog ran to the river".split()
    n = 2 * EMBED_WINDOW + 10
    lines = [" ".join(words[(i + j) % len(words)] for j in range(200)) + f" {i}" for i in range(n)]
    src = tmp_path / "long.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, out, err = run_cli(["ingest", str(src), "--store", str(tmp_path / "long"), "--model", str(tiny_distilbert),
                            "--precision", "fp32", "--quiet"], capsys)
    assert rc == 0, err
    said = [line for line in (err + "\n" + caplog.text).splitlines() if "longer than" in line or "truncated" in line]
    assert len(said) == 1, said
    assert f"note: {n} of the texts were longer than" in said[0]
    assert f"truncated {n};" in out
