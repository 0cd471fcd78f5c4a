"""The LaMa path: a TorchScript checkpoint called as model(image, mask), chosen by --inpainter lama or auto.

No LaMa weights exist here, so the test scripts a small module with LaMa's exact signature
(float NCHW image in [0, 1], float N1HW mask with 1 on the hole, returns the NCHW image): it fills
the hole by diffusing the surrounding colours inward (smooth, like Telea, so the fill gates can pass it)
and marks its work: every filled channel value is a multiple of 8, which the test checks pixel by pixel.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmfaith.builders.inpainters import resolve_inpainter
from mmfaith.cli import main
from mmfaith.errors import MmfaithError

from tests.conftest import read_records

torch = pytest.importorskip("torch", reason="LaMa needs PyTorch; .ci/run installs torch==2.13.0")


class DiffuseFill(torch.nn.Module):
    def forward(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        known = 1.0 - mask
        mean = (image * known).sum(dim=(2, 3), keepdim=True) / known.sum(dim=(2, 3), keepdim=True).clamp(min=1.0)
        filled = image * known + mean * mask
        for size in (31, 15, 7, 3):  # coarse to fine: the hole's inside takes the colours of its surroundings
            for _ in range(8):
                blurred = torch.nn.functional.avg_pool2d(filled, size, stride=1, padding=size // 2,
                                                         count_include_pad=False)
                filled = image * known + blurred * mask
        marked = torch.round(filled * 255.0 / 8.0) * 8.0 / 255.0
        return image * known + marked * mask


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lama") / "tiny-lama.pt"
    torch.jit.script(DiffuseFill()).save(str(path))
    return path


def test_lama_checkpoint_fills_the_removed_objects(checkpoint: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "build"
    code = main(["build", "spd-faith", "--out", str(out), "--per-tier", "1", "--edit-types", "remove",
                 "--inpainter", "lama", "--lama-model", str(checkpoint), "--no-progress",
                 # the scripted stand-in's smooth fill has no texture, which the texture gate rightly rejects
                 "--min-fill-texture", "0"])
    assert code == 0, capsys.readouterr().err
    records = read_records(out)
    assert records
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    for record in records:
        provenance = record["build"]["inpainter"]
        assert provenance["name"] == "lama" and provenance["weights_sha256"] == digest
        assert provenance["device"] == "cpu"
        with Image.open(out / record["image_b"]) as edited_image:
            edited = np.asarray(edited_image.convert("RGB"))
        with Image.open(out / record["image_a"]) as original_image:
            original = np.asarray(original_image.convert("RGB"))
        # The module marks every pixel it fills (each channel a multiple of 8), so every changed pixel of
        # image_b must carry the mark.
        changed = np.any(original != edited, axis=-1)
        assert changed.any() and not (edited[changed] % 8).any(), "the hole must come from the scripted module"
        # The object is gone: at least half of its area changed (the rest may match the fill color).
        assert changed.sum() >= 0.5 * record["differences"][0]["area_ratio"] * changed.size


def test_auto_prefers_lama_when_a_checkpoint_is_named(checkpoint: Path, monkeypatch) -> None:
    monkeypatch.setenv("LAMA_MODEL", str(checkpoint))
    assert resolve_inpainter("auto", None).name == "lama"
    assert resolve_inpainter("telea", None).name == "telea"
    monkeypatch.delenv("LAMA_MODEL")
    assert resolve_inpainter("auto", None).name == "patchmatch"  # no checkpoint: textured PatchMatch
    assert resolve_inpainter("auto", str(checkpoint)).name == "lama"


def test_a_file_that_is_not_torchscript_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "big-lama.pt"
    bogus.write_bytes(b"not a checkpoint")
    spec = resolve_inpainter("lama", str(bogus))
    with pytest.raises(MmfaithError, match="not a TorchScript LaMa checkpoint"):
        spec.build()
