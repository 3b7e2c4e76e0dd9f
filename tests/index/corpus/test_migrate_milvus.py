"""migrate checks what it copied row by row (issue 16, item 1): every copied row against a second
read of the source, by id; with --verify, a sample of texts embedded again against their stored
vectors. A Milvus Lite source that paired texts with other texts' vectors used to migrate into a
FAISS store that answered with the wrong sentence at score 1.0 and said `verified: true`."""
from __future__ import annotations

import numpy as np
import pytest

from index.store.errors import StoreError
from tests.support.store_backends import FakeBackend

try:
    import milvus_lite  # noqa: F401
    import pymilvus  # noqa: F401
    HAVE_MILVUS = True
except ImportError:
    HAVE_MILVUS = False
pytestmark = pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra")

TINY = "random:dim=32,layers=1,heads=2,ffn=64,seed=2"
TEXTS = [f"sentence number {i} about topic {i % 7}" for i in range(60)]


def _milvus_source(path, b):
    from index.opening import open_store
    loc = f"milvus-lite:{path}"
    with open_store(loc, create=True, fingerprint=b.fingerprint()) as s:
        s.add_texts(TEXTS, b)
    return loc


def _swap_vectors(loc, a: int, b: int):
    """Give ids a and b each other's vector, as the Lite read-back bug did (texts stay)."""
    from index.opening import open_store
    with open_store(loc) as s:
        rows = s._records([a, b], ["id", "vector", "text", "hash", "source", "row", "added",
                                   "meta"])
        ra, rb = dict(rows[a]), dict(rows[b])
        ra["vector"], rb["vector"] = rb["vector"], ra["vector"]
        s._client.upsert(s._name, data=[ra, rb])
        s.save()


def test_a_faithful_copy_is_checked_row_by_row(tmp_path):
    from index.corpus.migrate import migrate
    b = FakeBackend(dim=16)
    src = _milvus_source(tmp_path / "m", b)
    r = migrate(src, tmp_path / "f", batch=7, verify_backend=b, reembed_sample=25)
    assert r.verified and r.rows_checked == len(TEXTS) and r.reembedded == 25
    assert r.wrong_ids == []


def test_copy_check_catches_vectors_read_under_the_wrong_ids(tmp_path, monkeypatch):
    """The copy pass reads rows the way the old store did (vectors rotated within a batch);
    the second read is right: the check names the destination ids that got wrong vectors."""
    from index.corpus.migrate import migrate
    from index.milvus import MilvusStore
    b = FakeBackend(dim=16)
    src = _milvus_source(tmp_path / "m", b)
    real = MilvusStore.iter_batches
    calls = []

    def first_read_rotated(self, batch=2000, vectors=True):
        calls.append(batch)
        for ids, vecs, recs in real(self, batch, vectors):
            if len(calls) == 1 and vecs is not None:
                vecs = np.roll(vecs, 1, axis=0)
            yield ids, vecs, recs
    monkeypatch.setattr(MilvusStore, "iter_batches", first_read_rotated)
    with pytest.raises(StoreError, match="hold another vector than the source row") as e:
        migrate(src, tmp_path / "f", batch=20)
    assert "destination ids 1, 2, 3" in str(e.value)


def test_verify_catches_a_source_that_already_holds_wrong_vectors(tmp_path):
    from index.corpus.migrate import migrate
    b = FakeBackend(dim=16)
    src = _milvus_source(tmp_path / "m", b)
    _swap_vectors(src, 5, 9)
    # the copy itself is faithful: without --verify nothing can tell
    assert migrate(src, tmp_path / "plain").verified
    with pytest.raises(StoreError, match="do not match their stored vector") as e:
        migrate(src, tmp_path / "checked", verify_backend=b, reembed_sample=len(TEXTS))
    assert "destination ids 5, 9:" in str(e.value)


def _cli(capsys, *args):
    from app.cli import main
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_migrate_verify_on_the_command_line(tmp_path, capsys):
    """Real encoder (tiny, random weights) end to end: a clean copy verifies by embedding
    texts again; a source with two swapped vectors fails with one error line naming them."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS[:30]) + "\n")
    src = f"milvus-lite:{tmp_path / 'm'}"
    rc, _, err = _cli(capsys, "ingest", str(corpus), "--store", src, "--model", TINY, "--quiet")
    assert rc == 0, err
    rc, out, err = _cli(capsys, "migrate", "--from", src, "--to", str(tmp_path / "f"),
                        "--verify", "--quiet")
    assert rc == 0, err
    assert "30 rows compared with the source by id" in out and "30 texts embedded again" in out
    _swap_vectors(src, 3, 4)
    rc, out, err = _cli(capsys, "migrate", "--from", src, "--to", str(tmp_path / "g"),
                        "--verify", "--quiet")
    assert rc == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "destination ids 3, 4:" in lines[0] and "Traceback" not in err
