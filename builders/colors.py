"""The fixed vocabulary of basic color names and naming an object's color (the recolour is builders/recolour.py).

Vocabulary: the eleven basic color terms of Berlin and Kay (black, white, gray, red, orange,
yellow, green, blue, purple, pink, brown), each with one sRGB prototype (the recolor target).
Naming one CIELAB color (project rule, docs/spd_faith_build.md): if its chroma C = sqrt(a^2 + b^2)
is below 12 it is achromatic: black (L* < 30), white (L* >= 70: a white object in shade stays
white) or gray. Otherwise its hue angle h = atan2(b, a) decides (HUE_BANDS): red 15-50 degrees,
orange 50-75, yellow 75-105, green 105-200, blue 200-300, purple 300-335, pink 335-15; then a
dark or dull warm color is brown (red, orange or yellow band with L* < 45 and C < 60, or C < 25
and L* < 70: tan, chocolate, wood), and a light red or purple is pink (L* >= 60). Naming an object (`object_color`): every pixel of its mask is named by
that rule; the object's color is the name most of its pixels carry, and `share` is the fraction
of its pixels that carry it. An object whose top name covers less than MIN_DOMINANT_SHARE (45%)
of its pixels (a white pot with red flowers, a striped shirt) has no dominant color: it is never
recolored, since no single "color before" describes it.

Each name's prototype is the target of a recolour; the recolour itself (refined outline, shading kept,
refusals) is builders/recolour.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from mmfaith.vocabulary import COLOR_NAMES

COLOR_PROTOTYPES_RGB: dict[str, tuple[int, int, int]] = dict(zip(COLOR_NAMES, (
    (25, 25, 25),     # black
    (245, 245, 245),  # white
    (128, 128, 128),  # gray
    (200, 25, 30),    # red
    (245, 130, 20),   # orange
    (245, 215, 35),   # yellow
    (40, 155, 60),    # green
    (30, 80, 210),    # blue
    (125, 50, 165),   # purple
    (245, 140, 185),  # pink
    (125, 80, 40),    # brown
)))
ACHROMATIC = ("black", "white", "gray")
ACHROMATIC_CHROMA = 12.0
BLACK_MAX_L = 30.0
WHITE_MIN_L = 70.0
HUE_BANDS: tuple[tuple[float, str], ...] = (
    (15.0, "pink"), (50.0, "red"), (75.0, "orange"), (105.0, "yellow"), (200.0, "green"), (300.0, "blue"),
    (335.0, "purple"), (360.0, "pink"))
WARM = ("red", "orange", "yellow")
BROWN_MAX_L = 45.0
BROWN_MAX_CHROMA = 60.0
DULL_CHROMA = 25.0
DULL_BROWN_MAX_L = 70.0
PINK_MIN_L = 60.0
MIN_DOMINANT_SHARE = 0.45


def rgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """uint8 RGB (any leading shape, last axis 3) to float32 CIELAB (D65): L in [0, 100]."""
    flat = rgb.reshape(-1, 1, 3).astype(np.float32) / 255.0
    return cv2.cvtColor(flat, cv2.COLOR_RGB2Lab).reshape(rgb.shape).astype(np.float32)


def lab_to_rgb(lab: np.ndarray) -> np.ndarray:
    """float CIELAB to uint8 RGB, rounded and clipped."""
    flat = lab.reshape(-1, 1, 3).astype(np.float32)
    rgb = cv2.cvtColor(flat, cv2.COLOR_Lab2RGB).reshape(lab.shape)
    return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)


PROTOTYPES_LAB: dict[str, np.ndarray] = {
    name: rgb_to_lab(np.array(rgb, dtype=np.uint8)) for name, rgb in COLOR_PROTOTYPES_RGB.items()
}


def name_labs(labs: np.ndarray) -> np.ndarray:
    """Vocabulary indices (into COLOR_NAMES) of N CIELAB colors (Nx3), by the module's rule."""
    labs = np.asarray(labs, dtype=np.float32).reshape(-1, 3)
    lightness = labs[:, 0]
    chroma = np.hypot(labs[:, 1], labs[:, 2])
    hue = np.degrees(np.arctan2(labs[:, 2], labs[:, 1])) % 360.0
    edges = np.array([edge for edge, _ in HUE_BANDS])
    band = np.array([COLOR_NAMES.index(name) for _, name in HUE_BANDS])[np.searchsorted(edges, hue, side="right")
                                                                          .clip(0, len(edges) - 1)]
    warm = np.isin(band, [COLOR_NAMES.index(n) for n in WARM])
    brown = warm & (((lightness < BROWN_MAX_L) & (chroma < BROWN_MAX_CHROMA))
                    | ((chroma < DULL_CHROMA) & (lightness < DULL_BROWN_MAX_L)))
    pink = np.isin(band, [COLOR_NAMES.index("red"), COLOR_NAMES.index("purple")]) & (lightness >= PINK_MIN_L) & ~brown
    names = np.where(brown, COLOR_NAMES.index("brown"), np.where(pink, COLOR_NAMES.index("pink"), band))
    achromatic = np.where(lightness < BLACK_MAX_L, COLOR_NAMES.index("black"),
                          np.where(lightness > WHITE_MIN_L, COLOR_NAMES.index("white"), COLOR_NAMES.index("gray")))
    gray_enough = chroma < ACHROMATIC_CHROMA
    return np.where(gray_enough, achromatic, names)


def name_lab(lab: np.ndarray) -> str:
    """The vocabulary name of one CIELAB color (module docstring gives the rule)."""
    return COLOR_NAMES[int(name_labs(lab)[0])]


@dataclass(frozen=True)
class ObjectColor:
    """An object's color by its own pixels: the top name, its pixel share, and the median CIELAB color
    of the pixels that carry that name (the reference for target distances)."""

    name: str
    share: float
    lab: np.ndarray

    @property
    def dominant(self) -> bool:
        """True when one name describes the object (share >= MIN_DOMINANT_SHARE)."""
        return self.share >= MIN_DOMINANT_SHARE


def object_color(rgb: np.ndarray, mask: np.ndarray) -> ObjectColor:
    """Name the masked object from its own pixels (module docstring); ties go to the earlier vocabulary name."""
    labs = rgb_to_lab(rgb[mask])
    names = name_labs(labs)
    counts = np.bincount(names, minlength=len(COLOR_NAMES))
    top = int(np.argmax(counts))
    return ObjectColor(COLOR_NAMES[top], float(counts[top]) / float(max(1, names.size)),
                       np.median(labs[names == top], axis=0))


MONOCHROME_MAX_CHROMATIC = 0.01


def is_monochrome(rgb: np.ndarray) -> bool:
    """True for a black-and-white (or sepia-free gray) photo: fewer than 1% of its pixels (every
    4th row and column) reach the achromatic chroma limit. Nothing in such a photo is recolored."""
    lab = rgb_to_lab(np.ascontiguousarray(rgb[::4, ::4]))
    return float((np.hypot(lab[..., 1], lab[..., 2]) >= ACHROMATIC_CHROMA).mean()) < MONOCHROME_MAX_CHROMATIC


def name_object_color(rgb: np.ndarray, mask: np.ndarray) -> str:
    return object_color(rgb, mask).name


def distinct_targets(current: ObjectColor, min_delta_e: float, palette: tuple[str, ...] = COLOR_NAMES) -> list[str]:
    """Target colors of `palette` whose prototype lies at least min_delta_e (CIE76) from the object's
    color; none for an object without a dominant color."""
    if not current.dominant:
        return []
    return [
        name
        for name in COLOR_NAMES
        if name in palette and name != current.name
        and float(np.linalg.norm(PROTOTYPES_LAB[name] - current.lab)) >= min_delta_e
    ]
