"""The corpus jobs: worker-side functions run in app/gui/workers.py threads (open, ingest, import,
create, remove, re-embed, search), each a call of the corpus door (index.corpus.door) with the app's
progress labels, and the results they hand back to the UI thread."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import Cancelled
from core.long_lived import freeze_long_lived

# Sentences committed per transaction. The store embeds a window of up to index.store.base.EMBED_WINDOW
# sentences (those it does not hold yet) without holding its lock, then commits them this many
# at a time: searches wait only for a commit, never for the encoder.
CHUNK = 64
# Texts from which an ingest is bulk: its rows are frozen out of full collections (a typed
# sentence's are not: freezing each small add would keep its garbage cycles until the next load).
FREEZE_FROM = 1024


@dataclass
class IngestResult:
    ids: list = field(default_factory=list)       # ids of every committed text (duplicates: existing id)
    texts: list = field(default_factory=list)
    added: int = 0
    duplicates: int = 0
    truncated: int = 0
    cancelled: bool = False
    skipped: list = field(default_factory=list)   # BadLine from the file readers
    no_letters: int = 0                           # lines skipped for having no letter or digit
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [f"Added {self.added:,} sentence{'s' if self.added != 1 else ''}"]
        if self.duplicates:
            parts.append(f"{self.duplicates:,} already there")
        if self.truncated:
            parts.append(f"{self.truncated:,} cut to the model's maximum length")
        if self.skipped:
            b = self.skipped[0]
            parts.append(f"skipped {len(self.skipped):,} bad line(s), e.g. line {b.row}: {b.reason}")
        if self.no_letters:
            parts.append(f"skipped {self.no_letters:,} line(s) without any letter or digit")
        text = ", ".join(parts)
        return text + (" — cancelled; what was committed is kept" if self.cancelled else "")


@dataclass
class SearchResult:
    query: str
    k: int
    hits: list
    ms: float
    seq: int = 0
    embed_ms: float = 0.0      # of ms: embedding the query (the rest: FAISS scan + fetching texts)


def open_store_job(location, progress=None, cancel=None):
    """(store, ids, texts), or None when there is no store at ``location`` yet.

    location: a folder (FAISS), milvus-lite:FOLDER or http(s)://HOST:PORT (index.opening)."""
    from index.corpus import door
    from index.opening import describe_location

    progress(0, 0, f"Opening {describe_location(location)} …")
    store = door.open_corpus(location, writable=True, repair=True)
    if store is None:
        return None
    try:
        ids, texts = door.read_rows(store)
    except BaseException:
        store.close()
        raise
    return store, ids, texts


def ingest_job(store, backend, pooling, texts, metadata=None, skipped=(), progress=None, cancel=None,
               chunk=CHUNK):
    """Embed and commit ``texts`` in chunks (texts already stored are not embedded again); a
    cancel keeps every committed chunk."""
    from index.corpus import door
    t0 = time.perf_counter()
    texts = list(texts)
    metadata = list(metadata) if metadata is not None else [None] * len(texts)
    total = len(texts)
    label = f"Embedding {total:,} sentence{'s' if total != 1 else ''}"
    progress(0, total, label)

    def report(done, total, note):
        progress(done, total, (note[0].upper() + note[1:] + " …") if note else
                 label if done < total else "Saving the index …")
    items = list(zip(texts, metadata))
    if total >= FREEZE_FROM:
        # A bulk import's rows live as long as its job: out of the cyclic GC's full collections,
        # which would walk them with the GIL held and stall the UI thread (core/long_lived.py);
        # the app's next load thaws and collects them
        freeze_long_lived(collect=False)
    added = door.ingest(store, items, backend, pooling=pooling, batch_size=chunk,
                          progress=report, cancel=cancel)
    committed = len(added.ids)
    return IngestResult(ids=added.ids, texts=texts[:committed], added=added.added,
                        duplicates=added.duplicates, truncated=added.truncated,
                        cancelled=added.cancelled, skipped=list(skipped),
                        seconds=time.perf_counter() - t0)


@dataclass
class NeedsEncoding:
    """import_job's answer when the file is not UTF-8: nothing was added; ask for an encoding."""
    path: str              # the file
    column: str | None     # the CSV column / JSONL field chosen
    message: str           # what could not be read, for the dialog


def import_job(store, backend, pooling, path, column=None, encoding=None, progress=None, cancel=None):
    from app.gui.importers import NotInEncoding, read_sentences

    progress(0, 0, f"Reading {Path(path).name} …")
    try:   # the first try is strict about the encoding; a chosen one skips what it cannot read
        found = read_sentences(path, column, cancel=cancel, encoding=encoding,
                               strict_encoding=encoding is None)
    except NotInEncoding as e:
        return NeedsEncoding(str(path), column, str(e))
    if cancel.is_set():
        raise Cancelled("cancelled")
    result = ingest_job(store, backend, pooling, found.texts, found.metadata, found.bad,
                        progress=progress, cancel=cancel)
    result.no_letters = found.no_letters
    return result


def create_store_job(location, backend, pooling, sample=None, progress=None, cancel=None):
    """Create a store for ``backend`` and fill it with the sentences of the file ``sample`` (None:
    leave it empty)."""
    from app.gui.importers import read_sentences
    from index.corpus.door import create_corpus

    store = create_corpus(location, backend, pooling)
    result = IngestResult()
    if sample is not None:
        found = read_sentences(sample)
        meta = [{"source": Path(sample).name, "row": m["row"]} for m in found.metadata]
        result = ingest_job(store, backend, pooling, found.texts, meta, progress=progress, cancel=cancel)
    else:
        store.save()
    return store, result


def close_store_job(store):
    store.close()


def remove_job(store, ids, progress=None, cancel=None):
    """Delete ``ids``; returns (the ids that were there, their records {id: {text, metadata}}):
    what Undo adds back."""
    from index.corpus import door
    progress(0, 0, f"Deleting {len(ids):,} sentence(s) …")
    return door.remove(store, ids)


def rebuild_job(store, backend, pooling, progress=None, cancel=None):
    from index.corpus import door
    total = store.count()
    label = f"Re-embedding {total:,} sentences with {backend.model_name} ({pooling})"
    progress(0, total, label)
    door.reembed(store, backend, pooling, progress=lambda d, t: progress(d, t, label), cancel=cancel)
    return door.read_rows(store)


def search_job(store, backend, pooling, query, k, seq=0):
    from index.corpus import door
    hits, timing = door.search(store, query, k, backend, pooling)
    return SearchResult(query, k, hits, timing.total_ms, seq, timing.embed_ms)
