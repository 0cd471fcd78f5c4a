"""The text-embedding cache CRM scoring reads before it runs a model: content-addressed, float32.

Contract
--------
A vector is keyed by (model id, sha256 of the text's UTF-8 bytes, in hex); the model id is the
sha256 of the model's weights (`embed.DEFAULT_SHA256` for the pinned default, known without the
model installed). Vectors are float32 and unit length. `EmbeddingCache.lookup(texts)` looks each
distinct text up in three places, in order:

1. this process's memory: the last `memory_vectors` (MEMORY_VECTORS) vectors found or stored (the oldest dropped first, so a
   score's memory does not grow with the number of distinct texts it embeds);
2. the table shipped in the package, `mmfaith/data/embeddings/<model id[:16]>.npy`: a structured
   array of (key: the text's sha256 in hex, vector: float32[dim]) sorted by key, computed with the
   real model by `tools/make_crm_embeddings.py` over every text the default suite's CRM reference
   roles produce (so a plain install, without Sentence-BERT, scores them);
3. the user's cache, `$MMFAITH_CACHE/embeddings/<model id[:16]>/<key[:2]>/<key>.npy`, which the live
   model fills (`store`), written atomically so concurrent scorers never read a torn vector.

It returns the vectors found and the texts found nowhere (each once, in first-seen order).
"""
from __future__ import annotations

import hashlib
import io
from collections import OrderedDict
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

import numpy as np

from mmfaith.cache import cache_dir
from mmfaith.jsonl import write_atomic

MEMORY_VECTORS = 65_536
"""Vectors this process keeps in memory at most (about 100 MB of 384-float vectors)."""


def text_key(text: str) -> str:
    """The cache key of a text: the sha256 of its UTF-8 bytes, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shipped_path(model_id: str) -> Path:
    """Where the package's table for model `model_id` lives (whether or not it exists)."""
    return Path(str(files("mmfaith.data").joinpath("embeddings", f"{model_id[:16]}.npy")))


def table_dtype(dim: int) -> np.dtype:
    """The shipped table's row: the text's sha256 in hex, then its float32 vector."""
    return np.dtype([("key", "S64"), ("vector", "<f4", (dim,))])


def write_table(path: Path, vectors: dict[str, np.ndarray]) -> None:
    """Write `vectors` ({text key: vector}) as a shipped table, sorted by key (the same vectors give the same bytes)."""
    keys = sorted(vectors)
    dim = len(next(iter(vectors.values()))) if vectors else 0
    table = np.zeros(len(keys), dtype=table_dtype(dim))
    table["key"] = [key.encode("ascii") for key in keys]
    if keys:
        table["vector"] = np.stack([np.asarray(vectors[key], dtype=np.float32) for key in keys])
    buffer = io.BytesIO()
    np.save(buffer, table, allow_pickle=False)
    write_atomic(path, buffer.getvalue())


def read_table(path: Path) -> dict[str, np.ndarray]:
    """A shipped table as {text key: float32 vector}; empty when there is no table for the model."""
    if not path.is_file():
        return {}
    table = np.load(path, allow_pickle=False)
    return {key.decode("ascii"): vector for key, vector in zip(table["key"], table["vector"])}


class EmbeddingCache:
    """Memory, then the shipped table, then the user's cache, for one model (module docstring)."""

    def __init__(self, model_id: str, root: Path | None = None, memory_vectors: int = MEMORY_VECTORS) -> None:
        self.model_id = model_id
        self.memory_vectors = memory_vectors
        self.folder = (root or cache_dir()) / "embeddings" / model_id[:16]
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._shipped: dict[str, np.ndarray] | None = None  # read on first use

    def _file(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.npy"

    def _shipped_table(self) -> dict[str, np.ndarray]:
        if self._shipped is None:
            self._shipped = read_table(shipped_path(self.model_id))
        return self._shipped

    def forget(self) -> None:
        """Drop this process's memory (as a new process would start)."""
        self._memory.clear()

    def lookup(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """({key: vector} of every text found, {key: text} of those found nowhere), each text once."""
        found: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}
        for text in texts:
            key = text_key(text)
            if key in found or key in missing:
                continue
            vector = self._memory.get(key)
            if vector is None:
                vector = self._shipped_table().get(key)
            if vector is None:
                vector = self._read_user(key)
            if vector is None:
                missing[key] = text
            else:
                self._remember(key, vector)
                found[key] = vector
        return found, missing

    def _remember(self, key: str, vector: np.ndarray) -> None:
        """Keep `vector` in memory, dropping the oldest beyond `memory_vectors`."""
        self._memory[key] = vector
        if len(self._memory) > self.memory_vectors:
            self._memory.popitem(last=False)

    def held(self) -> int:
        """How many vectors this process holds in memory."""
        return len(self._memory)

    def _read_user(self, key: str) -> np.ndarray | None:
        path = self._file(key)
        if not path.is_file():
            return None
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None  # unreadable: the live model computes it again and replaces it

    def store(self, key: str, vector: np.ndarray) -> None:
        """Keep a vector the live model computed, in memory and in the user's cache."""
        vector = np.asarray(vector, dtype=np.float32)
        self._remember(key, vector)
        path = self._file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.save(buffer, vector, allow_pickle=False)
        write_atomic(path, buffer.getvalue())
