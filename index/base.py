"""The store interface. `index.store.VectorStore` (FAISS + SQLite) implements it; another
engine (Milvus, later) implements the same methods and the CLI/app work unchanged."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


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


@dataclass
class AddResult:
    ids: list             # id of every input text, in input order (existing id for a duplicate)
    added: int = 0
    duplicates: int = 0
    truncated: int = 0    # texts cut to the model's maximum length while embedding
    cancelled: bool = False


class Store(ABC):
    """A persistent set of sentences with their embeddings, searchable by cosine similarity."""

    @property
    @abstractmethod
    def fingerprint_dict(self) -> dict: ...

    @abstractmethod
    def add(self, texts, vectors, metadata=None, fingerprint=None) -> AddResult: ...

    @abstractmethod
    def add_texts(self, texts, backend, metadata=None, **kw) -> AddResult: ...

    @abstractmethod
    def search(self, query, k: int = 10, *, backend=None, fingerprint=None): ...

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
