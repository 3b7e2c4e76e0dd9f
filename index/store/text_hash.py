"""The text hash both stores use to store each distinct text once (one implementation).

`text_hash(text)`: BLAKE2b-128 of the UTF-8 text (lone surrogates kept, so every Python str has
one hash). The FAISS store keeps the 16 bytes in SQLite; Milvus keeps their hex (32 characters).

Milvus stores written before this module (collection format 1) hold SHA-256 hex digests; they
keep them (`hash_for_format`), so their rows are still found as duplicates, and new rows added
to them use the same scheme. Format 2 collections use text_hash.
"""
from __future__ import annotations

import hashlib


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def text_hashes(texts) -> list[bytes]:
    """text_hash of each text, in one loop (an ingest hashes every text it reads)."""
    blake2b = hashlib.blake2b
    return [blake2b(_utf8(t), digest_size=16).digest() for t in texts]


def text_hash(text: str) -> bytes:
    """16-byte BLAKE2b digest of the UTF-8 text (lone surrogates kept)."""
    return text_hashes((text,))[0]


def text_hash_hex(text: str) -> str:
    """text_hash as 32 hex characters (Milvus VARCHAR)."""
    return text_hash(text).hex()


def legacy_sha256_hex(text: str) -> str:
    """What Milvus collections of format 1 stored: SHA-256 hex (64 characters)."""
    return hashlib.sha256(_utf8(text)).hexdigest()


def hash_for_format(format_version: int):
    """The str -> hex hash function a Milvus collection of this format stores."""
    return legacy_sha256_hex if int(format_version) < 2 else text_hash_hex
