"""The store interface. `index.faiss.store.VectorStore` (FAISS + SQLite) and
`index.milvus.MilvusStore` implement it; the CLI, the app and migrate use only this."""
from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from core.errors import InputError
from index.store import fingerprint as fpmod
from index.store.adding import AddResult, add_stream, normalize
from index.store.errors import ModelMismatch, StoreError

ENCODER_WORDS = {"scratch": "the from-scratch encoder", "hf": "the transformers encoder"}


def encoder_of(backend) -> dict:
    """What a store records of the encoder that embedded its vectors: its backend and precision
    (the fingerprint, which both encoders share for the same weights, cannot tell them apart)."""
    return {"backend": getattr(backend, "backend", None), "precision": getattr(backend, "precision", None)}


def describe_encoders(record: list | None) -> str:
    """'the transformers encoder in bf16'; a store made before stores recorded it: 'not recorded'."""
    if not record:
        return "not recorded (the store was made before stores recorded their encoder)"
    return " and ".join(f"{ENCODER_WORDS.get(e.get('backend'), 'an unrecorded encoder')}"
                        + (f" in {e['precision']}" if e.get("precision") else "") for e in record)


@dataclass(frozen=True)
class Hit:
    score: float          # cosine similarity
    id: int
    text: str
    metadata: dict = field(default_factory=dict)   # source, row, added (+ user keys)

    def to_dict(self, metadata: bool = False) -> dict:
        d = {"score": float(self.score), "id": int(self.id), "text": self.text}
        if metadata:
            d["metadata"] = self.metadata
        return d


class Store(ABC):
    """A persistent set of sentences with their embeddings, searchable by cosine similarity.

    Implementations set ``self._fp`` (the model fingerprint dict), ``self._dim`` and
    ``self._mutex``, say where they are in ``where`` and provide the two steps of adding:
    ``_plan`` (duplicates) and ``_store_planned`` (write the new rows)."""

    _fp: dict
    _dim: int
    _whitening = None     # core.evaluate.whitening.Whitening of a whitened store (index/store/whitening.py), else None
    _encoders: list | None = None   # encoder_of() each encoder that embedded stored vectors; None: not recorded

    @property
    def encoders(self) -> list[dict] | None:
        """The encoders (backend, precision) that embedded the stored vectors; None: not recorded."""
        return None if self._encoders is None else [dict(e) for e in self._encoders]

    @property
    def encoder_backend(self) -> str | None:
        """The one backend that embedded every stored vector, None when unknown or mixed."""
        backends = {e.get("backend") for e in self._encoders or []}
        return backends.pop() if len(backends) == 1 else None

    def _record_encoder(self, backend, had_vectors: bool, replace: bool = False) -> None:
        """After vectors from ``backend`` were stored: add it to the record (``replace``: every
        vector is now its). Vectors of a store that recorded nothing stay 'not recorded'."""
        known = [] if replace else list(self._encoders or [])
        if not replace and self._encoders is None and had_vectors:
            known.append({"backend": None, "precision": None})
        mine = encoder_of(backend)
        if mine not in known:
            known.append(mine)
        if known != self._encoders:
            self._encoders = known
            self._save_encoders(known)

    def _save_encoders(self, record: list) -> None:  # noqa: B027 - a hook; kept in memory by default
        """Persist the encoder record (the FAISS store: its database and manifest)."""

    # ---- identity ------------------------------------------------------------------------
    @property
    @abstractmethod
    def where(self) -> str:
        """The folder or location, for messages."""

    @property
    def fingerprint_dict(self) -> dict:
        return dict(self._fp)

    @property
    def fingerprint(self):
        return fpmod.from_dict(self._fp)

    @property
    def whitening(self):
        """The store's whitening transform (core.evaluate.whitening.Whitening), or None."""
        return self._whitening

    @property
    def model_fingerprint_dict(self) -> dict:
        """The fingerprint of the model's own vectors that this store takes: its own, or for a
        whitened store the one its transform expects."""
        if self._whitening is None:
            return dict(self._fp)
        from index.store.whitening import model_fingerprint
        return model_fingerprint(self._fp, self._whitening)

    def _check_model(self, fingerprint, what: str) -> bool:
        """Raise ModelMismatch unless `fingerprint` is the store's (vectors as stored) or, for a
        whitened store, its model's (vectors to whiten first); True for the latter."""
        other = fpmod.as_dict(fingerprint)
        raw = self._whitening is not None and not other.get("whitening")
        fpmod.check(self.model_fingerprint_dict if raw else self._fp, other, what,
                    where=f"at {self.where}", remedy=lambda: self.mismatch_remedy(other))
        return raw

    def _to_store_space(self, unit_vectors) -> np.ndarray:
        """The model's unit vectors as this store keeps them (whitened, if it is)."""
        return unit_vectors if self._whitening is None else self._whitening.apply(unit_vectors)

    def model_for_checks(self, backend):
        """`backend` as the store sees it: embed() gives vectors comparable with the stored ones."""
        if self._whitening is None:
            return backend
        from index.store.whitening import WhitenedModel
        return WhitenedModel(backend, self._whitening)

    @property
    def model_name(self) -> str:
        return self._fp.get("model")

    @property
    def pooling(self) -> str:
        return self._fp.get("pooling", "mean")

    @property
    def dim(self) -> int:
        return self._dim

    def mismatch_remedy(self, other) -> dict:
        """What fpmod.check needs to word a mismatch with `other` and offer re-embedding: the hint
        (in words, no command line) and the rebuild as data."""
        other = fpmod.as_dict(other)
        try:
            n = f"{self.count()} "
        except StoreError:
            n = ""
        model, pooling = other.get("model"), other.get("pooling", "mean")
        if self._whitening is not None and fpmod.only_network_differs(self.model_fingerprint_dict, other):
            return {"hint": f"the config or tokenizer files of {model} changed since the store was built "
                            "(the weights did not): put them back, or ingest the texts into a new "
                            "whitened store (its whitening was fitted for the model as it was)", "rebuild": None}
        if self._whitening is not None:     # its transform belongs to its model: no re-embedding
            return {"hint": f"use it with {self._fp.get('model')} ({self.pooling} pooling); a whitened "
                            f"store keeps the model its whitening was fitted for, so for {model} "
                            f"({pooling} pooling) ingest the texts into a new store", "rebuild": None}
        if fpmod.only_network_differs(self.model_fingerprint_dict, other):
            hint = (f"the config or tokenizer files of {model} changed since the store was built (the "
                    f"weights did not): put them back, or re-embed all {n}sentences with the model as it is now")
        else:
            hint = (f"use it with {self._fp.get('model')} ({self.pooling} pooling), or re-embed all {n}"
                    f"sentences with {model} ({pooling} pooling)")
        return {"hint": hint, "rebuild": {"model": model, "pooling": pooling, "location": str(self.where)}}

    def _check_vectors(self, vectors, fingerprint, what) -> np.ndarray:
        """Vectors checked against the store's model (once) and dimension, as the store keeps them:
        L2-normalised once, or for the model's own vectors of a whitened store (its fingerprint
        given) normalised, then whitened (the transform normalises its output)."""
        raw = fingerprint is not None and self._check_model(fingerprint, what)
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim == 1:
            x = x[None, :]
        width = self._whitening.input_dim if raw else self._dim
        if x.ndim != 2 or x.shape[1] != width:
            raise ModelMismatch(
                f"{what} have {x.shape[-1]} dimensions, but the store at {self.where} holds "
                f"{self._dim}-d vectors from {fpmod.describe(self._fp)}",
                store_model=self._fp.get("model"))
        if not np.all(np.isfinite(x)):
            raise InputError(f"{what} contain NaN or infinite values")
        return self._whitening.apply(normalize(x)) if raw else normalize(x)

    def _query_vectors(self, vectors, fingerprint) -> np.ndarray:
        """Unit query vectors (n, D) from a matrix (n, D) or one vector (D,) (one query); texts
        are embedded by the corpus door (index.corpus.door.search), not here."""
        if isinstance(vectors, str) or (isinstance(vectors, (list, tuple)) and vectors
                                        and isinstance(vectors[0], str)):
            raise InputError("a store searches vectors: search a text with index.corpus.door.search")
        return self._check_vectors(vectors, fingerprint, "the query vectors")

    def _vector_for(self, text, vector, backend, fingerprint) -> np.ndarray:
        """update_text's new vector: the one given (checked), or `text` embedded by `backend`."""
        if vector is None:
            if backend is None:
                raise InputError("update_text needs a vector or a backend to embed with")
            fingerprint = backend.fingerprint(pooling=self.pooling)
            vector = backend.embed([text], pooling=self.pooling)[0]
        return self._check_vectors(vector, fingerprint, "the vector")[0]

    # ---- adding ----------------------------------------------------------------------------
    @abstractmethod
    def _need_writer(self) -> None: ...

    @abstractmethod
    def _text_keys(self, texts) -> list:
        """Each text checked (InputError) and its duplicate key (its hash): computed once per
        text and handed to _plan (keys)."""

    @abstractmethod
    def _plan(self, texts, result: AddResult, keys=None):
        """-> (plan, dup_of, context): see plan_unique; context goes to _store_planned.
        keys: the texts' _text_keys when already at hand."""

    def _change_mark(self):
        """A value that changes with every committed change (None: the store keeps none, and
        add_stream looks up each window's duplicates again when it commits it)."""
        return None

    def _stored_ids(self, keys) -> dict:
        """hash -> id of the keys the store holds (used only when _change_mark is not None)."""
        raise NotImplementedError

    @abstractmethod
    def _store_planned(self, plan, texts, metas, vecs, result: AddResult, context, ids=None):
        """Write texts[i] for i in plan with vecs (one row each, in plan order); their new ids
        go to result.ids[i] and result.added. ids: keep these ids instead of new ones."""

    def can_keep_ids(self) -> bool:
        """Whether add(..., ids=...) may store rows under given ids (migrate keeps the source's
        ids then): only a store that numbers rows itself says no, and one that has handed out
        ids before says no too, since ids are never reused."""
        return False

    def pending_reindex(self) -> str | None:
        """What the next save() will rebuild (a long job), in words, or None."""
        return None

    def prepare_index(self, progress=None, cancel=None) -> None:  # noqa: B027 - a hook; most stores need none
        """Do the long rebuild pending_reindex() announces now, with progress(done, total) and
        a cancel Event (stores that build in chunks); by default there is none."""

    def _commit_guard(self):
        """Held around a commit's duplicate check and write (a server store: its writer lock,
        so that writers sharing it cannot both add a text or hand out one id)."""
        return contextlib.nullcontext()

    def exclusive(self):
        """The writer lock held across a whole operation of several commits (migrate): a
        server store's lease; a folder's lock is held from opening already."""
        return self._commit_guard()

    def _end_stream(self) -> None:  # noqa: B027 - a hook; most stores need none
        """After add_stream's last batch (Milvus: flush)."""

    def _add_vectors(self, texts, vectors, metadata=None, fingerprint=None, ids=None) -> AddResult:
        self._need_writer()
        texts = list(texts)
        x = self._check_vectors(vectors, fingerprint, "the vectors") if len(texts) else None
        if x is not None and len(x) != len(texts):
            raise InputError(f"{len(texts)} texts but {len(x)} vectors")
        metadata = list(metadata) if metadata is not None else [None] * len(texts)
        result = AddResult(ids=[None] * len(texts))
        with self._mutex, self._commit_guard():
            plan, dup_of, context = self._plan(texts, result)
            if plan:
                self._store_planned(plan, texts, metadata, x[plan], result, context, ids)
            for i, j in dup_of.items():
                result.ids[i] = result.ids[j]
        return result

    def add(self, texts, vectors, metadata=None, fingerprint=None, *, ids=None) -> AddResult:
        """Add texts with their vectors (one row each). The same text is stored once: a
        duplicate (of the store or of an earlier text in this call) is counted, not added.
        ids: keep these ids (migrate into a store that never handed one out, can_keep_ids)."""
        return self._add_vectors(texts, vectors, metadata, fingerprint, ids)

    def add_stream(self, items, backend, *, pooling=None, batch_size: int | None = None,
                   embed_batch_size: int | None = None, progress=None, cancel=None,
                   result: AddResult | None = None, keep_ids: bool = False,
                   window: int | None = None) -> AddResult:
        """Embed and add (text, metadata) items (or plain texts) in committed batches.

        Items are read `window` at a time (at least batch_size; None: EMBED_WINDOW to start,
        then about WINDOW_SECONDS of the encoder's measured rate, index/store/adding.py), each
        text hashed once; the texts of a window that the store does not hold yet are tokenised
        and embedded together, outside the store's lock (searches go on meanwhile), on helper
        threads while the window before is committed (index/store/embed_ahead.py: the next
        window is tokenised while this one is embedded), and then committed in input order,
        batch_size at a time (None: a window at a time; one transaction and one FAISS add each).
        embed_batch_size: rows per encoder batch (None: the backend's plan for its device,
        core/encoder/batching.py). progress(done, total) as a window is embedded and once it
        is committed (total None for an iterator). An interruption (Ctrl-C, kill, cancel)
        keeps what was committed: a prefix of the input; what is lost is the rest of the
        window being committed and the windows being embedded and tokenised. A cancel (cancel
        set) returns with result.cancelled; KeyboardInterrupt propagates. `result` is updated in place as
        batches commit; with keep_ids its ids list gets every input's id.
        Call save() (or close()) afterwards.
        """
        return add_stream(self, items, backend, pooling=pooling, batch_size=batch_size,
                          embed_batch_size=embed_batch_size, progress=progress, cancel=cancel,
                          result=result, keep_ids=keep_ids, window=window)

    def add_texts(self, texts, backend, metadata=None, **kw) -> AddResult:
        """Embed and add texts; result.ids holds every input's id, in input order."""
        texts = list(texts)
        metadata = list(metadata) if metadata is not None else [None] * len(texts)
        kw.setdefault("keep_ids", True)
        return self.add_stream(list(zip(texts, metadata)), backend, **kw)

    # ---- the rest ----------------------------------------------------------------------------
    @abstractmethod
    def iter_batches(self, batch: int = 2000, vectors: bool = True):
        """Yield (ids int64 (n,), vectors float32 (n, dim) or None, records) in id order."""

    @abstractmethod
    def search(self, vectors, k: int = 10, *, fingerprint=None):
        """The k nearest sentences by cosine similarity to each query: a matrix (n, D) of n
        queries (a vector (D,) is one) -> list[list[Hit]], one list per query, each sorted by
        score (ties by id); always this shape (the door's search gives one query's list).
        `fingerprint`: the model the vectors come from, checked once against the store's."""

    @abstractmethod
    def remove(self, ids) -> list: ...

    @abstractmethod
    def update_text(self, id, text, vector=None, *, backend=None) -> None: ...

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def iter(self): ...

    @abstractmethod
    def get(self, ids) -> dict: ...

    @abstractmethod
    def clear(self) -> None: ...

    @abstractmethod
    def rebuild(self, backend, pooling=None, **kw) -> None: ...

    @abstractmethod
    def save(self) -> None: ...

    @abstractmethod
    def info(self) -> dict: ...

    @abstractmethod
    def close(self) -> None: ...

    def __len__(self):
        return self.count()

    def __iter__(self):
        return iter(self.iter())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
