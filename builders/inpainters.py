"""Inpainters fill a masked hole in an RGB image; only the hole's pixels may change.

- `telea` / `ns`: OpenCV's classical inpainting (Telea 2004; Navier-Stokes), no weights, deterministic.
  Both diffuse the border colors inward: a large hole becomes a smooth smear (the fill gate,
  gates.fill_texture_ratio, rejects that where the surround is textured).
- `patchmatch`: PatchMatch (Barnes et al. 2009) from `patchmatch-cython` (BSD-3), coarse-to-fine,
  patch 5, fixed seed PATCHMATCH_SEED: copies texture from around the hole, no weights, CPU,
  byte-identical for the same input.
- `lama`: LaMa (Suvorov et al. 2022) through its TorchScript checkpoint `big-lama.pt`, called as
  `model(image, mask)` on float tensors in [0, 1] with sides padded to a multiple of 8; on the GPU
  when one is available. The path comes from `--lama-model` or the LAMA_MODEL environment variable.
- `auto`: `lama` when a checkpoint is given and torch imports, else `patchmatch`, else (package not
  importable) `telea`, said on the console and recorded as the spec's `note` (build.json).

An inpainter is built from an `InpainterSpec` inside each worker process (TorchScript modules do
not pickle), and it reports its own provenance for the records. `process_inpainter` builds it once
per process; a deterministic one is wrapped in a `HoleCache`, so a hole filled once on the same
pixels is never filled again in that build, whichever worker asks (a build retries the same object
on the same image across slots, tiers and pair sizes).
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import cv2
import numpy as np

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file

INPAINTER_CHOICES = ("auto", "lama", "patchmatch", "telea", "ns")
CLASSICAL_RADIUS = 5
PATCHMATCH_PATCH = 5
PATCHMATCH_SEED = 0
LAMA_PAD = 8


class Inpainter(Protocol):
    name: str
    deterministic: bool

    def fill(self, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
        """The image with the pixels under `hole` (bool HxW) replaced; all others unchanged."""

    def provenance(self) -> dict[str, Any]:
        """What made the pixels: name, weights hash, device."""


@dataclass(frozen=True)
class InpainterSpec:
    """A picklable description of the chosen inpainter, resolved once in the main process."""

    name: str
    lama_model: Path | None = None
    note: str | None = None

    def build(self) -> Inpainter:
        if self.name == "lama":
            assert self.lama_model is not None
            return LamaInpainter(self.lama_model)
        if self.name == "patchmatch":
            return PatchMatchInpainter()
        return ClassicalInpainter(self.name)


def resolve_inpainter(choice: str, lama_model: str | None) -> InpainterSpec:
    """Turn the user's --inpainter / --lama-model (or LAMA_MODEL) into a concrete spec."""
    if choice not in INPAINTER_CHOICES:
        raise MmfaithError(f"--inpainter {choice!r} is not one of {', '.join(INPAINTER_CHOICES)}.")
    path_text = lama_model or os.environ.get("LAMA_MODEL")
    path = Path(path_text) if path_text else None
    if choice in ("telea", "ns"):
        return InpainterSpec(choice)
    if choice == "patchmatch":
        problem = _patchmatch_problem()
        if problem:
            raise MmfaithError(f"--inpainter patchmatch: {problem}; pip install patchmatch-cython, "
                               "or pass --inpainter telea.")
        return InpainterSpec("patchmatch")
    if choice == "lama":
        if path is None:
            raise MmfaithError("--inpainter lama needs the big-lama.pt TorchScript file: pass --lama-model FILE or set LAMA_MODEL.")
        if not path.is_file():
            raise MmfaithError(f"{path}: LaMa checkpoint not found (from --lama-model or LAMA_MODEL).")
        _require_torch()
        return InpainterSpec("lama", path)
    if path is not None and path.is_file() and _torch_available():
        return InpainterSpec("lama", path)
    problem = _patchmatch_problem()
    if problem is None:
        return InpainterSpec("patchmatch")
    note = f"--inpainter auto: {problem}, so Telea fills the holes (smooth, not textured)"
    print(f"mmfaith: {note}; pip install patchmatch-cython for textured fills.", file=sys.stderr)
    return InpainterSpec("telea", note=note)


def _patchmatch_problem() -> str | None:
    """None when patchmatch-cython's compiled solver imports; else what is wrong."""
    try:
        importlib.import_module("patchmatch_cython.cython_solver_impl")
    except ImportError as exc:
        return f"patchmatch-cython (compiled) cannot be imported ({exc})"
    return None


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _require_torch() -> None:
    if not _torch_available():
        raise MmfaithError("LaMa inpainting needs PyTorch: pip install 'mmfaith[lama]' (torch==2.13.0 on these machines).")


class ClassicalInpainter:
    """OpenCV Telea or Navier-Stokes inpainting."""

    deterministic = True

    def __init__(self, name: str) -> None:
        self.name = name
        self._flag = cv2.INPAINT_TELEA if name == "telea" else cv2.INPAINT_NS

    def fill(self, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
        filled = cv2.inpaint(rgb, hole.astype(np.uint8) * 255, CLASSICAL_RADIUS, self._flag)
        return np.where(hole[..., None], filled, rgb)

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "library": f"opencv {cv2.__version__}", "radius": CLASSICAL_RADIUS, "device": "cpu"}


class PatchMatchInpainter:
    """PatchMatch inpainting (patchmatch-cython): coarse-to-fine, textured, seeded, CPU."""

    name = "patchmatch"
    deterministic = True

    def __init__(self) -> None:
        import patchmatch_cython
        from patchmatch_cython import CythonSolver

        self._module = patchmatch_cython
        self._solver = CythonSolver

    def fill(self, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
        filled = self._module.inpaint_pyramid(np.ascontiguousarray(rgb), hole, patch_size=PATCHMATCH_PATCH,
                                              solver_class=self._solver, seed=PATCHMATCH_SEED)
        return np.where(hole[..., None], filled.astype(np.uint8), rgb)

    def provenance(self) -> dict[str, Any]:
        return {"name": "patchmatch", "library": f"patchmatch-cython {self._module.__version__}",
                "patch_size": PATCHMATCH_PATCH, "seed": PATCHMATCH_SEED, "device": "cpu"}


class LamaInpainter:
    """LaMa through its TorchScript checkpoint; GPU when available."""

    name = "lama"

    def __init__(self, checkpoint: Path) -> None:
        import torch

        self._torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.deterministic = self.device == "cpu"
        self.checkpoint = checkpoint
        self.weights_sha256 = sha256_file(checkpoint)
        try:
            self.model = torch.jit.load(str(checkpoint), map_location=self.device)
        except (RuntimeError, ValueError) as exc:
            raise MmfaithError(f"{checkpoint}: not a TorchScript LaMa checkpoint ({exc}).") from exc
        self.model.eval()

    def fill(self, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
        torch = self._torch
        height, width = hole.shape
        pad_h, pad_w = (-height) % LAMA_PAD, (-width) % LAMA_PAD
        image = np.pad(rgb, ((0, pad_h), (0, pad_w), (0, 0)), mode="symmetric")
        mask = np.pad(hole, ((0, pad_h), (0, pad_w)), mode="symmetric")
        image_t = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float().div(255.0)[None]
        mask_t = torch.from_numpy(mask.astype(np.float32))[None, None]
        with torch.inference_mode():
            out = self.model(image_t.to(self.device), mask_t.to(self.device))
        result = out[0].permute(1, 2, 0).float().cpu().numpy()[:height, :width]
        filled = np.clip(np.rint(result * 255.0), 0, 255).astype(np.uint8)
        return np.where(hole[..., None], filled, rgb)

    def provenance(self) -> dict[str, Any]:
        return {
            "name": "lama",
            "weights_sha256": self.weights_sha256,
            "weights_file": self.checkpoint.name,
            "device": self.device,
            "torch": self._torch.__version__,
        }


class HoleCache:
    """A deterministic inpainter whose fills are kept in `folder` (shared by the build's workers).

    The key is the inpainter's provenance, the image's pixels and the hole; the file holds the
    hole's filled pixels, so a fill read back is the same bytes as one computed. Nothing but the
    fills goes through the folder; the build removes it when it ends (staging.clear_staging).
    """

    def __init__(self, inner: Inpainter, folder: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.deterministic = inner.deterministic
        self.folder = folder
        self._salt = json.dumps(inner.provenance(), sort_keys=True).encode("utf-8")

    def fill(self, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
        rgb = np.ascontiguousarray(rgb)
        digest = hashlib.sha256(self._salt)
        for part in (np.array(rgb.shape, dtype=np.int64), rgb, np.packbits(hole)):
            digest.update(part.tobytes())
        path = self.folder / f"{digest.hexdigest()}.npy"
        filled = rgb.copy()
        if path.is_file():
            filled[hole] = np.load(path)
            return filled
        filled = self.inner.fill(rgb, hole)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(partial, "wb") as handle:
            np.save(handle, filled[hole])
        os.replace(partial, path)
        return filled

    def provenance(self) -> dict[str, Any]:
        return self.inner.provenance()


_BUILT: dict[tuple[InpainterSpec, Path | None], Inpainter] = {}


def process_inpainter(spec: InpainterSpec, hole_cache: Path | None) -> Inpainter:
    """This process's inpainter for `spec`, built once (weights load once per worker); fills of a
    deterministic one go through the HoleCache in `hole_cache` when one is given."""
    key = (spec, hole_cache)
    if key not in _BUILT:
        inpainter = spec.build()
        _BUILT[key] = HoleCache(inpainter, hole_cache) if hole_cache is not None and inpainter.deterministic \
            else inpainter
    return _BUILT[key]
