"""Recolouring an object so that it looks painted by nature, not by a brush (shared by every builder).

A COCO polygon is a coarse outline: it cuts into the object (the old colour shows as a fringe) and
strays onto what lies beside it (the new colour spills there), and a see-through object's polygon
(a bicycle's wheels, a chair's spindles) holds the background seen through it. A recolour that
paints the polygon with a flat colour shows all three to a careful annotator (issue 29). So:

1. The outline is refined (`object_support`): GrabCut (OpenCV) decides every pixel within BAND (12)
   pixels of the polygon's edge, from colour models of the polygon's inside and of the ring around
   it, seeded with the polygon (inside: probably the object; the ring: probably not; beyond the
   band: surely not). The support is the refined pixels that touch the polygon's core.
2. An object is refused (`refusal`) when its outline cannot be trusted: the refinement keeps less
   than MIN_KEPT (85 %) of the polygon (a see-through shape: its polygon holds background; or a
   polygon that is mostly not the object) or adds more than MAX_ADDED (20 %) of it (the polygon
   misses much of the object); or when the support is smaller than MIN_PIXELS (1500, about 0.5 % of a
   640 x 480 photo: too small to judge its shading or edges; issue 29's audit rejected a recoloured
   catcher's mitt of 20 x 31 px and a far closed umbrella of 1,045 px as targets nobody can make out).
3. The colour is changed as light would show a different paint (`ObjectPaint.apply`): in linear RGB,
   every pixel becomes the target's albedo times the pixel's own shading (its luminance over the
   object's median luminance), so shadows, highlights and texture in lightness stay where they
   were and darker parts get less chroma, as in a photo. A lightened object's shading is flattened
   a little (SHADING_FLATTEN) and a saturated albedo is desaturated just enough that its brightest
   pixels stay inside sRGB (no flat clipped paint). The albedo keeps the target's chromaticity (its
   prototype, colors.COLOR_PROTOTYPES_RGB) at the lightness closest to the object's own at which the
   result reads clearly as the target (`_reads_as`: TARGET_SHARE (60 %) of its pixels named the
   target, the median colour still so under small moves of lightness, chroma and hue, vivid enough,
   pink and yellow light): a black suitcase becomes dark green, not the prototype's mid green painted
   flat. The albedo takes the least chroma that reads clearly as the target, one step of CHROMA_KEEPS
   more (desaturated toward its own gray): the prototype's full chroma comes out neon and flat (issue
   29's audit: a white vase painted saturated red, yellow or green, a wooden table neon green), and a
   "white" is at least WHITE_TARGET_L light (a shaded canopy made "white" came out light gray). A
   target is refused (`ObjectPaint.refusal`) when that lightness lies more than
   MAX_LIGHTNESS_JUMP (50) L* from the object's own or is over MAX_GAIN (6) times as bright, when the
   object is darker than MIN_LIGHTNESS_TO_LIGHTEN (8: its pixels are noise, not shading) and would
   be lightened, when more than MAX_CLIPPED_SHARE (5 %) of its pixels are over MAX_SHADING times its
   median luminance (a light pattern on a dark object: a printed logo on an umbrella, a window, a
   glare, which one albedo would paint with the rest and the clipped shading would flatten), or when
   the object's mean hue already leans to the target (LEAN_HUE: a dark purple
   suitcase named black made purple leaves the photo's answer in doubt).
4. The edge is soft: the support's matte (blurred by EDGE_SIGMA) blends the recoloured pixels
   into the photo's own, so the object's anti-aliased rim changes with it; `region` (where any
   pixel may change) is the matte's non-zero pixels, a pixel or two beyond the support.

Everything depends only on the pixels and the mask (OpenCV's random generator is seeded before
GrabCut), so a recolour is byte-identical across runs and processes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import cv2
import numpy as np

from mmfaith.builders.colors import (CLEAR_LIGHTNESS, COLOR_PROTOTYPES_RGB, PINK_MIN_L, PROTOTYPES_LAB, clearly_named,
                                     hue_degrees, name_labs, rgb_to_lab)
from mmfaith.builders.mask_box import grown_box
from mmfaith.vocabulary import COLOR_NAMES

BAND = 12
CORE = 3
GRABCUT_ITERATIONS = 4
MIN_KEPT = 0.85
MAX_ADDED = 0.20
MIN_PIXELS = 1500
EDGE_SIGMA = 0.8
MATTE_FLOOR = 0.05
TARGET_SHARE = 0.60
MAX_LIGHTNESS_JUMP = 50.0
MIN_LIGHTNESS_TO_LIGHTEN = 8.0
LIGHTNESS_STEPS = 51
MAX_SHADING = 4.0
MAX_CLIPPED_SHARE = 0.05
SHADING_PERCENTILE = 95.0
MIN_CHROMA = 15.0
LEAN_CHROMA = 4.0
LEAN_HUE = 45.0
LIGHT_TARGETS = {"pink": PINK_MIN_L, "yellow": 70.0}
WHITE_TARGET_L = 85.0
MAX_TARGET_L = {"blue": 45.0, "black": 20.0, "green": 60.0}
BLACK_QUANTILE = 75.0
SHADED_TARGETS = ("white", "yellow")
SHADE_QUANTILE = 10.0
MIN_SHADE_L = 55.0
CHROMA_PER_LIGHTNESS = 0.5
VIVID_TARGETS = {"red": 1.0}
MAX_GAIN = 6.0
SHADING_FLATTEN = 0.35
CHROMA_KEEPS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@cache
def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def _srgb_to_linear(rgb: np.ndarray) -> np.ndarray:
    c = rgb.astype(np.float32) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4).astype(np.float32)


def _linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    c = np.clip(linear, 0.0, 1.0)
    encoded = np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(c, 1.0 / 2.4) - 0.055)
    return np.clip(np.rint(encoded * 255.0), 0, 255).astype(np.uint8)


LUMINANCE = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)


def _luminance(linear: np.ndarray) -> np.ndarray:
    return linear @ LUMINANCE


@dataclass(frozen=True)
class Support:
    """An object's refined outline on a box of the image: `box` (rows, columns), `pixels` (bool, the
    object's own pixels in the box), `matte` (float weights in [0, 1], the soft edge), and how it
    compares with the polygon (`kept`: share of the polygon inside the support; `added`: support
    outside the polygon, as a share of the polygon)."""

    box: tuple[slice, slice]
    pixels: np.ndarray
    matte: np.ndarray
    kept: float
    added: float

    def refusal(self) -> str | None:
        """Why the outline cannot be trusted for a recolour (module docstring), or None."""
        if int(self.pixels.sum()) < MIN_PIXELS:
            return f"too small to recolour ({int(self.pixels.sum())} pixels < {MIN_PIXELS})"
        if self.kept < MIN_KEPT:
            return (f"its outline holds what is not the object (see-through or loose: the refined outline keeps "
                    f"{self.kept:.2f} of it < {MIN_KEPT})")
        if self.added > MAX_ADDED:
            return f"its outline misses much of the object (refinement adds {self.added:.2f} > {MAX_ADDED})"
        return None


def object_support(rgb: np.ndarray, mask: np.ndarray) -> Support | None:
    """The object's refined outline (module docstring, step 1); None for an empty mask."""
    box = grown_box(mask, BAND + 2)
    if box is None:
        return None
    crop = np.ascontiguousarray(rgb[box])
    polygon = mask[box].astype(np.uint8)
    near = cv2.dilate(polygon, _disk(BAND)).astype(bool)
    core = cv2.erode(polygon, _disk(CORE)).astype(bool)
    seeds = np.full(polygon.shape, cv2.GC_BGD, dtype=np.uint8)
    seeds[near] = cv2.GC_PR_BGD
    seeds[polygon.astype(bool)] = cv2.GC_PR_FGD
    pixels = polygon.astype(bool)
    if core.any() and (~near).any():
        cv2.setRNGSeed(0)
        background, foreground = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
        cv2.grabCut(cv2.cvtColor(crop, cv2.COLOR_RGB2BGR), seeds, None, background, foreground,
                    GRABCUT_ITERATIONS, cv2.GC_INIT_WITH_MASK)
        decided = (seeds == cv2.GC_FGD) | (seeds == cv2.GC_PR_FGD)
        count, labels = cv2.connectedComponents(decided.astype(np.uint8), connectivity=8)
        touching = np.unique(labels[core & decided])
        pixels = np.isin(labels, touching[touching > 0]) & near
    area = float(polygon.sum())
    kept = float((pixels & polygon.astype(bool)).sum()) / area if area else 0.0
    added = float((pixels & ~polygon.astype(bool)).sum()) / area if area else 0.0
    matte = cv2.GaussianBlur(pixels.astype(np.float32), (0, 0), EDGE_SIGMA)
    matte = np.where(pixels, 1.0, matte)
    matte[matte < MATTE_FLOOR] = 0.0
    return Support(box, pixels, matte.astype(np.float32), kept, added)


def _reads_as(labs: np.ndarray, target: str) -> bool:
    """True when TARGET_SHARE of the pixels are named `target` (colors.name_labs) and their median colour is
    named `target` clearly (colors.clearly_named: a near-black "blue", a salmon "red" next to pink are not); a
    chromatic target has a chroma of at least MIN_CHROMA and CHROMA_PER_LIGHTNESS times its lightness
    (VIVID_TARGETS times for red: a red of lower chroma is coral or salmon to a person, next to pink; a pale
    lavender is not clearly blue; a dark green may be less vivid than a light one), and pink and yellow are
    light (median lightness at least LIGHT_TARGETS + CLEAR_LIGHTNESS: a dark pink reads plum, a dark yellow
    olive), white at least WHITE_TARGET_L (a light gray is not white); blue and green at most MAX_TARGET_L and
    black so over BLACK_QUANTILE (75 %) of its pixels, and white and yellow at least MIN_SHADE_L (55) over all but
    SHADE_QUANTILE (10 %) of them (issue 29's audit: a lighter "blue" reads periwinkle, blue or purple to a
    person; a light "green" neon mint; a "black" with lit fur over L* 20 charcoal gray; a "white" or "yellow"
    canopy whose shaded part lies darker reads gray or olive there)."""
    if float((name_labs(labs) == COLOR_NAMES.index(target)).mean()) < TARGET_SHARE:
        return False
    median = np.median(labs, axis=0)
    if not clearly_named(median, target):
        return False
    lightness, chroma = float(median[0]), float(np.hypot(median[1], median[2]))
    if lightness - CLEAR_LIGHTNESS < LIGHT_TARGETS.get(target, 0.0):
        return False  # a dark pink (by hue alone) is plum to a person, a dark yellow olive
    if target == "white" and lightness < WHITE_TARGET_L:
        return False  # a shaded "white" is light gray to a person
    top = float(np.percentile(labs[:, 0], BLACK_QUANTILE)) if target == "black" else lightness
    if top > MAX_TARGET_L.get(target, 100.0):
        return False  # a light "blue" is periwinkle, a light "green" neon mint, a lit "black" charcoal gray
    if target in SHADED_TARGETS and float(np.percentile(labs[:, 0], SHADE_QUANTILE)) < MIN_SHADE_L:
        return False  # the shaded part of a "white" reads gray, of a "yellow" olive
    return target in ("black", "white", "gray") or \
        chroma >= max(MIN_CHROMA, VIVID_TARGETS.get(target, CHROMA_PER_LIGHTNESS) * lightness)


def _lean(labs: np.ndarray) -> float | None:
    """The hue angle (degrees) of the object's mean colour when its chroma is LEAN_CHROMA or more, else None
    (a neutral mean)."""
    a, b = (float(v) for v in labs[:, 1:].mean(axis=0)) if labs.size else (0.0, 0.0)
    return float(hue_degrees(a, b)) if np.hypot(a, b) >= LEAN_CHROMA else None


def _leans_to(lean: float | None, target: str) -> bool:
    """True when a chromatic target's prototype hue lies within LEAN_HUE degrees of the object's lean: a dark
    purple suitcase named black leans to purple, so "purple" would be an answer for the photo too."""
    if lean is None or target in ("black", "white", "gray"):
        return False
    proto = PROTOTYPES_LAB[target]
    hue = float(hue_degrees(proto[1], proto[2]))
    return abs((hue - lean + 180.0) % 360.0 - 180.0) < LEAN_HUE


@dataclass(frozen=True)
class Recolour:
    """A recoloured image: `image`; `region`, the pixels that may have changed; `support`, the object's
    own pixels (where the change must show)."""

    image: np.ndarray
    region: np.ndarray
    support: np.ndarray


def _luminance_of(lightness: float) -> float:
    """The relative luminance Y of CIE L* `lightness`."""
    return ((lightness + 16.0) / 116.0) ** 3 if lightness > 8.0 else lightness / 903.3


def _lightness_of(luminance: float) -> float:
    return 116.0 * luminance ** (1.0 / 3.0) - 16.0 if luminance > 0.008856 else 903.3 * luminance


def _albedo(target: str, lightness: float, keep: float = 1.0) -> np.ndarray:
    """The target prototype's chromaticity in linear RGB, scaled to the luminance of L* = `lightness`, its
    chroma kept by `keep` (1: the prototype's; less: desaturated toward the gray of the same luminance)."""
    proto = _srgb_to_linear(np.array(COLOR_PROTOTYPES_RGB[target], dtype=np.uint8))
    albedo = proto * (_luminance_of(lightness) / float(_luminance(proto)))
    if keep >= 1.0:
        return albedo
    gray = float(_luminance(albedo))
    return (gray + keep * (albedo - gray)).astype(np.float32)


class ObjectPaint:
    """One object of one image, ready to be recoloured: its refined outline and its shading (module docstring).
    Computed once and asked for every target (`refusal`, `apply`)."""

    def __init__(self, rgb: np.ndarray, mask: np.ndarray) -> None:
        self.rgb = rgb
        self.mask = mask
        support = object_support(rgb, mask)
        if support is None:
            raise ValueError("an empty mask cannot be recoloured")
        self.support = support
        self.crop = np.ascontiguousarray(rgb[support.box])
        pixels = support.pixels if support.pixels.any() else mask[support.box]
        self.reference = max(float(np.median(_luminance(_srgb_to_linear(self.crop[pixels])))), 1e-4)
        self.own = _lightness_of(self.reference)
        shading = self._shading(pixels)
        self.clipped = float((shading >= MAX_SHADING).mean()) if shading.size else 0.0
        self.sample = shading[:: max(1, shading.size // 4000)]
        self.lean = _lean(rgb_to_lab(self.crop[pixels]))

    def _shading(self, pixels: np.ndarray) -> np.ndarray:
        """Each pixel's luminance over the object's median luminance, clipped to MAX_SHADING."""
        luminance = _luminance(_srgb_to_linear(self.crop[pixels]))
        return np.clip(luminance / self.reference, 0.0, MAX_SHADING).astype(np.float32)

    def _render(self, shading: np.ndarray, target: str, lightness: float, keep: float) -> np.ndarray:
        """The target's albedo at `lightness` with its chroma kept by `keep`, lit by each pixel's shading (module
        docstring, step 3)."""
        gain = _luminance_of(lightness) / self.reference
        exponent = 1.0 / (1.0 + SHADING_FLATTEN * float(np.log2(gain))) if gain > 1.0 else 1.0
        lit = np.power(shading, exponent)
        return _linear_to_srgb(lit[:, None] * self._headroom(_albedo(target, lightness, keep), lit)[None, :])

    def _reads(self, target: str, lightness: float, keep: float) -> bool:
        return _reads_as(rgb_to_lab(self._render(self.sample, target, lightness, keep)), target)

    def _keep(self, target: str, lightness: float) -> float | None:
        """How much of the prototype's chroma the albedo keeps at `lightness` (module docstring, step 3): the least
        of CHROMA_KEEPS that reads clearly as `target`, one step more where that still reads. None when none
        reads."""
        for step, keep in enumerate(CHROMA_KEEPS):
            if self._reads(target, lightness, keep):
                more = CHROMA_KEEPS[min(step + 1, len(CHROMA_KEEPS) - 1)]
                return more if self._reads(target, lightness, more) else keep
        return None

    def _headroom(self, albedo: np.ndarray, lit: np.ndarray) -> np.ndarray:
        """The albedo desaturated toward its own gray (same luminance) just enough that the object's brightest
        pixels but the top (100 - SHADING_PERCENTILE) % stay inside sRGB: a saturated red clipped at its channel
        limit would lose the shading there and look flat."""
        bright = float(np.percentile(lit, SHADING_PERCENTILE)) if lit.size else 1.0
        gray = float(_luminance(albedo))
        peak = float(albedo.max())
        if peak * bright <= 1.0 or peak <= gray:
            return albedo
        keep = float(np.clip((1.0 / bright - gray) / (peak - gray), 0.0, 1.0))
        return gray + keep * (albedo - gray)

    def _lightness(self, target: str, bounded: bool) -> tuple[float, float] | None:
        """The lightness closest to the object's own at which its rendered pixels clearly read as `target`
        (`_reads_as`), with the chroma kept there (`_keep`); `bounded`: only within MAX_LIGHTNESS_JUMP, at most
        MAX_GAIN times its luminance, and no lighter at all for an object darker than MIN_LIGHTNESS_TO_LIGHTEN.
        None when there is none."""
        low, high = 0.0, 100.0
        if bounded:
            low = max(0.0, self.own - MAX_LIGHTNESS_JUMP)
            high = self.own if self.own < MIN_LIGHTNESS_TO_LIGHTEN else min(
                100.0, self.own + MAX_LIGHTNESS_JUMP, _lightness_of(MAX_GAIN * self.reference))
        for lightness in sorted(np.linspace(low, high, LIGHTNESS_STEPS), key=lambda v: (abs(v - self.own), v)):
            keep = self._keep(target, float(lightness))
            if keep is not None:
                return float(lightness), keep
        return None

    def leans_to(self, colour: str) -> bool:
        """True when the object's mean hue already leans to `colour` (`_leans_to`)."""
        return _leans_to(self.lean, colour)

    def refusal(self, target: str) -> str | None:
        """Why the object cannot be recoloured to `target` naturally (module docstring), or None."""
        refused = self.support.refusal()
        if refused is not None:
            return refused
        if self.leans_to(target):
            return f"its own colour already leans to {target} (mean hue {self.lean:.0f} degrees): the photo's answer would be in doubt"
        if self._lightness(target, bounded=True) is None:
            return (f"no {target} it could naturally take (its lightness is {self.own:.0f} L*; the new one may lie "
                    f"{MAX_LIGHTNESS_JUMP:.0f} from it, at most {MAX_GAIN:.0f} times as bright)")
        if self.clipped > MAX_CLIPPED_SHARE:
            return (f"{self.clipped:.2f} of its pixels are over {MAX_SHADING:.0f} times its median luminance (> "
                    f"{MAX_CLIPPED_SHARE}): a light pattern (a logo, a window, a glare) would be painted with it")
        return None

    def apply(self, target: str) -> Recolour:
        """The image with the object recoloured to `target`; pixels outside `region` untouched. Never refuses:
        a target `refusal` refuses is rendered at the nearest lightness that names it (planners ask first)."""
        found = self._lightness(target, bounded=True) or self._lightness(target, bounded=False)
        lightness, keep = found or (_lightness_of(float(_luminance(_srgb_to_linear(
            np.array(COLOR_PROTOTYPES_RGB[target], dtype=np.uint8))))), 1.0)
        matte = self.support.matte if self.support.pixels.any() else self.mask[self.support.box].astype(np.float32)
        region = matte > 0.0
        painted = self._render(self._shading(region), target, lightness, keep).astype(np.float32)
        alpha = matte[region][:, None]
        blended = self.crop[region].astype(np.float32) * (1.0 - alpha) + painted * alpha
        out_crop = self.crop.copy()
        out_crop[region] = np.clip(np.rint(blended), 0, 255).astype(np.uint8)
        image = self.rgb.copy()
        image[self.support.box] = out_crop
        full_region = np.zeros(self.mask.shape, dtype=bool)
        full_region[self.support.box] = region
        full_support = np.zeros(self.mask.shape, dtype=bool)
        full_support[self.support.box] = self.support.pixels if self.support.pixels.any() else region
        return Recolour(image, full_region, full_support)


def recolour(rgb: np.ndarray, mask: np.ndarray, target: str) -> Recolour:
    """`ObjectPaint(rgb, mask).apply(target)`."""
    return ObjectPaint(rgb, mask).apply(target)
