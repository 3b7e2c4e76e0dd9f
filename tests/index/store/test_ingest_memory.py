"""`encoderscope ingest` holds one window of sentences, not the corpus: its files are read
again as they are embedded (after a first pass that counts and checks them)."""
import sys
from pathlib import Path

import pytest

import core.readers
from app.cli import main
from index.store.adding import EMBED_WINDOW, MAX_WINDOW
from tests.support.paths import ROOT
from tests.support.tiny_models import make_tiny_bert


def test_ingest_reads_its_sentences_as_it_embeds_them(tmp_path, monkeypatch, capsys):
    model = make_tiny_bert(tmp_path / "m")
    n = 2 * EMBED_WINDOW + MAX_WINDOW + 2 * MAX_WINDOW
    (tmp_path / "a.txt").write_text("".join(f"the cat {i}\n" for i in range(n)), encoding="utf-8")
    read = [0]
    real_read_file = core.readers.read_file

    def counting(*a, **k):
        for rec in real_read_file(*a, **k):
            read[0] += 1
            yield rec
    monkeypatch.setattr(core.readers, "read_file", counting)
    seen_at_commits = []
    real_store_planned = None

    def recording(self, *a, **k):
        seen_at_commits.append(read[0])
        return real_store_planned(self, *a, **k)
    from index.faiss.store import VectorStore
    real_store_planned = VectorStore._store_planned
    monkeypatch.setattr(VectorStore, "_store_planned", recording)
    assert main(["ingest", str(tmp_path / "a.txt"), "--model", str(model), "--store",
                 str(tmp_path / "s"), "--quiet"]) == 0
    assert f"added {n}," in capsys.readouterr().out
    # the first pass read all n; at the first commit the second pass has read at most three
    # windows (window k+1 is embedded and k+2 tokenised while window k is committed: the first
    # two of EMBED_WINDOW, the third grown to at most MAX_WINDOW), never the whole file
    first = seen_at_commits[0] - n
    assert 0 < first <= 2 * EMBED_WINDOW + MAX_WINDOW + 1 < n, seen_at_commits[:3]


@pytest.mark.slow
def test_peak_memory_beyond_the_index_is_flat_in_the_rows():
    """The bench's own measurement (fresh processes, peak RSS from the kernel), at 1k and
    150k rows: what the ingest holds beyond the index grows by less than 64 bytes a row (it
    was ~770 when every sentence was read into memory first)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import tempfile

    import ingest_memory as bench
    with tempfile.TemporaryDirectory() as tmp:
        small, _ = bench.peak_rss_of_ingest(1_000, 32, Path(tmp), "flat")
        big, _ = bench.peak_rss_of_ingest(150_000, 32, Path(tmp), "flat")
    small_peer, big_peer = bench.peak_rss_of_index(1_000, 32), bench.peak_rss_of_index(150_000, 32)
    beyond = ((big - big_peer) - (small - small_peer)) * 1024 * 1024 / 149_000
    assert beyond < 64, f"{beyond:.0f} bytes per row beyond the index"
