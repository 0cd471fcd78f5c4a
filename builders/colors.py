"""The fixed vocabulary of basic color names and naming an object's color (the recolour is builders/recolour.py).

Vocabulary: the eleven basic color terms of Berlin and Kay (black, white, gray, red, orange,
yellow, green, blue, purple, pink, brown), each with one sRGB prototype (the recolor target).
Naming one CIELAB color (project rule, docs/spd_faith_build.md): if its chroma C = sqrt(a^2 + b^2)
is below 12 it is achromatic: black (L* < 30), white (L* >= 70: a white object in shade stays
white) or gray. Otherwise its hue angle h = atan2(b, a) decides (HUE_BANDS): red 15-50 degrees,
orange 50-75, yellow 75-105, green 105-200, blue 200-300, purple 300-335, pink 335-15; then a
dark or dull warm color is brown (red, orange or yellow band with L* < 45 and C < 60, or C < 25
and L* < 70: tan, chocolate, wood), and a light red or purple is pink (L* >= 60).

Naming an object (`object_color`, the gold of every family's colour question and the "before" of
every recolor) uses the object's own pixels only, and refuses rather than guesses:
1. body: the mask eroded by BODY_EROSION (2) pixels, whose edge mixes with the background (the mask
   itself for thin shapes, when erosion would keep under MIN_BODY_SHARE, 25%, of it);
2. specular highlights (L* > SPECULAR_MIN_L, 97) are dropped (unless they are most of the body);
3. a body whose pixels are mostly (ACHROMATIC_BODY_SHARE, 60%) neutral -- chroma under 12, too dark
   for a hue (L* < SHADOW_MAX_L, 12), or pale (L* >= 75 and chroma < 20: cream, ivory, a white
   object under warm light) -- is achromatic and named by its lightness as a whole, median and upper
   quartile: black (median < 24, upper quartile < 34), white (median >= 68, upper quartile >= 75)
   or gray (median 30 to 45, upper quartile < 45, and the whole body's 90th percentile < 55: a dark
   gray such as a silver car at night, with no lit part near white);
   anything between is refused: a white microwave, toilet or truck in shade measures like a light
   gray object, and only the scene tells them apart; a black body is refused too when its lit
   part (L* >= LIT_MIN_L, 15, at least MIN_LIT_SHARE, 10%, of it) is colored (median chroma >= 12:
   dark wood in a dim room), or when it is lit enough for a hue to show (median L* >= DARK_HUE_MIN_L,
   10) and its median chroma reaches DARK_COLOURED_CHROMA (6.5): a navy suitcase, a chocolate glaze,
   a dark patterned box read as dark colors to a person, while black plastic, a black horse or a
   black umbrella stay under 6.5 (below L* 10 a chroma is sensor noise); a white body is refused
   when at least TWO_TONE_SHARE (15%) of it is black (L* < BLACK_MAX_L): a white-and-tabby cat, a
   white horse with dark legs and tack, a black-and-white bag have no one name;
4. otherwise the chromatic pixels are named one by one; the top name is the object's and `share`
   its fraction of the body; when the runner-up holds at least SPLIT_RATIO (0.6) of the top's
   pixels (a blue-rimmed yellow frisbee) the object is refused, and so it is when the median color of
   its chromatic pixels does not keep the top name under small moves (`clearly_named`, NAMING_MOVES:
   CLEAR_LIGHTNESS 6 L* either way, CLEAR_CHROMA 35 % more chroma): a rust-orange couch lies between
   brown and red, and a careful annotator would hesitate over either;
5. see-through and blending: when at least MIN_FOREIGN_SHARE (20%) of the body has one of its
   surroundings' colors (`surround_colored`) and the rest alone reads another name (the wall between
   a chair's spindles, the pavement inside a bicycle's frame), the object is refused.
An object with a refusal, or whose share is under MIN_DOMINANT_SHARE (45%) (a white pot with red
flowers, a striped shirt), has no dominant color: it is never asked about nor recolored, since no
single "color before" describes it. A recolor target is one whose prototype, as a flat object, the
same rule names without refusal (`CERTIFIED_TARGETS`): mid-gray (L* 54) is not one, since a gray
object that light cannot be told from a white one in shade.

Each name's prototype is the target of a recolour; the recolour itself (refined outline, shading kept,
refusals) is builders/recolour.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from mmfaith.builders.mask_box import grown_box
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
BODY_EROSION = 2
MIN_BODY_SHARE = 0.25
SPECULAR_MIN_L = 97.0
SHADOW_MAX_L = 12.0
PALE_MIN_L = 75.0
PALE_MAX_CHROMA = 20.0
ACHROMATIC_BODY_SHARE = 0.6
BLACK_BODY_MAX_L = 24.0
BLACK_BODY_MAX_UPPER_L = 34.0
WHITE_BODY_MIN_L = 68.0
WHITE_BODY_MIN_UPPER_L = 75.0
GRAY_BODY_L = (30.0, 45.0)
GRAY_BODY_MAX_UPPER_L = 45.0
GRAY_BODY_MAX_TOP_L = 55.0
SPLIT_RATIO = 0.6
LIT_MIN_L = 15.0
MIN_LIT_SHARE = 0.1
DARK_HUE_MIN_L = 10.0
DARK_COLOURED_CHROMA = 6.5
TWO_TONE_SHARE = 0.15
SURROUND_GAP = 3
SURROUND_REACH = 8
SURROUND_BIN = 6.0
SURROUND_MIN_SHARE = 0.02
MIN_FOREIGN_SHARE = 0.2
CLEAR_LIGHTNESS = 6.0
CLEAR_CHROMA = 0.35
CLEAR_HUE = 8.0


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


def hue_degrees(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray | float:
    """The CIELAB hue angle in degrees, in [0, 360), of a* and b* (scalars or arrays alike)."""
    return np.degrees(np.arctan2(b, a)) % 360.0


def name_labs(labs: np.ndarray) -> np.ndarray:
    """Vocabulary indices (into COLOR_NAMES) of N CIELAB colors (Nx3), by the module's rule."""
    labs = np.asarray(labs, dtype=np.float32).reshape(-1, 3)
    lightness = labs[:, 0]
    chroma = np.hypot(labs[:, 1], labs[:, 2])
    hue = hue_degrees(labs[:, 1], labs[:, 2])
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


CLEAR_MOVES: tuple[tuple[float, float, float], ...] = (
    (-CLEAR_LIGHTNESS, 0, 0), (CLEAR_LIGHTNESS, 0, 0), (0, -CLEAR_CHROMA, 0), (0, CLEAR_CHROMA, 0),
    (0, 0, -CLEAR_HUE), (0, 0, CLEAR_HUE))
"""Moves of (lightness, chroma share, hue degrees) a clearly named color survives (a recolour's result)."""
NAMING_MOVES = tuple(move for move in CLEAR_MOVES if move[1] >= 0 and move[2] == 0)
"""The moves an object's own color must survive: its lightness either way and more chroma; not a loss of
chroma, since the naming rule's dark-warm border (brown under chroma 60) lies inside strong reds, nor a
turn of hue, since its blue-purple border (300 degrees) lies inside strong blues (sRGB's pure blue is at
306): nobody hesitates over those."""


def clearly_named(lab: np.ndarray, name: str, moves: tuple[tuple[float, float, float], ...] = CLEAR_MOVES) -> bool:
    """True when the CIELAB color `lab` keeps the name `name` under every move of `moves` (lightness in L*,
    chroma as a share, hue in degrees; CLEAR_LIGHTNESS, CLEAR_CHROMA, CLEAR_HUE): a color near a border of
    the naming (a rust couch between brown and red, a salmon between red and pink) is not clearly either."""
    lightness, a, b = (float(v) for v in np.asarray(lab, dtype=np.float32).reshape(3))
    chroma, hue = float(np.hypot(a, b)), float(np.arctan2(b, a))
    variants = [(lightness + dl, chroma * (1.0 + dc), hue + np.radians(dh)) for dl, dc, dh in moves]
    moved = np.array([(v, r * np.cos(h), r * np.sin(h)) for v, r, h in variants], dtype=np.float32)
    return bool((name_labs(moved) == COLOR_NAMES.index(name)).all())


@dataclass(frozen=True)
class ObjectColor:
    """An object's color by its own pixels (`object_color`): the name, its share of the object's body
    pixels, the median CIELAB color of the pixels that carry it (the reference for target distances),
    and `refusal`: why no single name describes the object (None when one does)."""

    name: str
    share: float
    lab: np.ndarray
    refusal: str | None = None

    @property
    def dominant(self) -> bool:
        """True when one name describes the object: no refusal and share >= MIN_DOMINANT_SHARE."""
        return self.refusal is None and self.share >= MIN_DOMINANT_SHARE


def surround_ring(inside: np.ndarray) -> np.ndarray:
    """The pixels between SURROUND_GAP and SURROUND_REACH outside a bool mask (pass the mask's box grown
    by SURROUND_REACH): the object's surroundings, past its own blurred edge."""
    grown = inside.astype(np.uint8)
    far = cv2.dilate(grown, np.ones((2 * SURROUND_REACH + 1,) * 2, np.uint8)).astype(bool)
    return far & ~cv2.dilate(grown, np.ones((2 * SURROUND_GAP + 1,) * 2, np.uint8)).astype(bool)


def surround_colored(rgb: np.ndarray, mask: np.ndarray, pixels: np.ndarray) -> np.ndarray:
    """Which of `pixels` (a bool mask inside `mask`) have one of the object's surroundings' colors.

    The surroundings are the pixels between SURROUND_GAP and SURROUND_REACH outside the mask (the
    gap skips the mask's own blurred edge); their CIELAB colors are binned (SURROUND_BIN units a
    side) and a bin holding at least SURROUND_MIN_SHARE of them is a surrounding color. Returns one
    bool per True pixel of `pixels`, in row-major order (as `rgb[pixels]`).
    """
    box = grown_box(mask, SURROUND_REACH)
    result = np.zeros(int(pixels.sum()), dtype=bool)
    if box is None or not result.size:
        return result
    ring = surround_ring(mask[box])
    if not ring.any():
        return result
    crop = np.ascontiguousarray(rgb[box])
    ring_bins = _lab_bins(rgb_to_lab(crop[ring]))
    counts = np.zeros(_BIN_SHAPE, dtype=np.int64)
    np.add.at(counts, tuple(ring_bins.T), 1)
    common = counts >= SURROUND_MIN_SHARE * ring_bins.shape[0]
    return common[tuple(_lab_bins(rgb_to_lab(crop[pixels[box]])).T)]


_BIN_SHAPE = (int(100 // SURROUND_BIN) + 2, int(256 // SURROUND_BIN) + 2, int(256 // SURROUND_BIN) + 2)


def _lab_bins(labs: np.ndarray) -> np.ndarray:
    """Integer (L, a, b) bin indices of SURROUND_BIN units (Nx3)."""
    scaled = np.floor((labs + np.array([0.0, 128.0, 128.0], dtype=np.float32)) / SURROUND_BIN).astype(np.int64)
    return np.clip(scaled, 0, np.array(_BIN_SHAPE) - 1)


def body_pixels(mask: np.ndarray) -> np.ndarray:
    """The mask eroded by BODY_EROSION pixels (its edge mixes with the background), or the mask itself
    when the erosion would keep less than MIN_BODY_SHARE of it (thin shapes)."""
    if not mask.any():
        return mask
    box = grown_box(mask, 1)
    assert box is not None
    kernel = np.ones((2 * BODY_EROSION + 1,) * 2, np.uint8)
    eroded = np.zeros_like(mask)
    eroded[box] = cv2.erode(mask[box].astype(np.uint8), kernel, borderType=cv2.BORDER_REPLICATE).astype(bool)
    return eroded if eroded.sum() >= MIN_BODY_SHARE * mask.sum() else mask


def achromatic_name(lightness: np.ndarray, top: float) -> tuple[str, str | None]:
    """The name of an achromatic body from its neutral pixels' L* and the 90th percentile L* of its whole
    body (`top`: a white object in shade keeps a lit part) (module docstring): (name, refusal or None)."""
    median, upper = (float(v) for v in np.percentile(lightness, (50, 75)))
    if median < BLACK_BODY_MAX_L and upper < BLACK_BODY_MAX_UPPER_L:
        return "black", None
    if median >= WHITE_BODY_MIN_L and upper >= WHITE_BODY_MIN_UPPER_L:
        return "white", None
    if GRAY_BODY_L[0] <= median <= GRAY_BODY_L[1] and upper < GRAY_BODY_MAX_UPPER_L and top < GRAY_BODY_MAX_TOP_L:
        return "gray", None
    nearest = "black" if median < GRAY_BODY_L[0] else "gray" if median < WHITE_BODY_MIN_L else "white"
    return nearest, (f"achromatic body of median L* {median:.0f} (upper quartile {upper:.0f}) lies between "
                     "black, gray and white in shade")


def _name_body(labs: np.ndarray, moves: tuple[tuple[float, float, float], ...] = NAMING_MOVES) -> ObjectColor:
    """Name a body's CIELAB pixels (module docstring "Naming an object", steps 2 to 4); a chromatic name must
    survive `moves` (`clearly_named`)."""
    lightness, chroma = labs[:, 0], np.hypot(labs[:, 1], labs[:, 2])
    kept = lightness <= SPECULAR_MIN_L
    if kept.mean() >= MIN_BODY_SHARE:  # specular highlights say nothing of the object's color
        labs, lightness, chroma = labs[kept], lightness[kept], chroma[kept]
    neutral = (chroma < ACHROMATIC_CHROMA) | (lightness < SHADOW_MAX_L) | (
        (lightness >= PALE_MIN_L) & (chroma < PALE_MAX_CHROMA))
    if neutral.mean() >= ACHROMATIC_BODY_SHARE:
        name, refusal = achromatic_name(lightness[neutral], float(np.percentile(lightness, 90)))
        lit = lightness >= LIT_MIN_L
        if name == "black" and refusal is None and lit.mean() >= MIN_LIT_SHARE and (
                float(np.median(chroma[lit])) >= ACHROMATIC_CHROMA):
            refusal = (f"a dark body whose lit part (L* >= {LIT_MIN_L:.0f}) has median chroma "
                       f"{float(np.median(chroma[lit])):.0f}: black or a dark color")
        if name == "white" and refusal is None and float((lightness < BLACK_MAX_L).mean()) >= TWO_TONE_SHARE:
            refusal = (f"{float((lightness < BLACK_MAX_L).mean()):.0%} of a white body is black (L* < "
                       f"{BLACK_MAX_L:.0f}): patched or two-toned, no one name")
        if name == "black" and refusal is None and float(np.median(lightness)) >= DARK_HUE_MIN_L and (
                float(np.median(chroma)) >= DARK_COLOURED_CHROMA):
            refusal = (f"a dark body of median L* {float(np.median(lightness)):.0f} and median chroma "
                       f"{float(np.median(chroma)):.1f}: navy, dark brown or dark purple rather than black")
        return ObjectColor(name, float(neutral.mean()), np.median(labs[neutral], axis=0), refusal)
    names = name_labs(labs[~neutral])
    counts = np.bincount(names, minlength=len(COLOR_NAMES))
    order = np.argsort(-counts, kind="stable")
    top, second = int(order[0]), int(order[1])
    share = float(counts[top]) / float(labs.shape[0])
    refusal = (f"{COLOR_NAMES[second]} on {counts[second] / labs.shape[0]:.0%} of its body against "
               f"{COLOR_NAMES[top]} on {share:.0%}" if counts[second] >= SPLIT_RATIO * counts[top] else None)
    median = np.median(labs[~neutral], axis=0)
    if refusal is None and not clearly_named(median, COLOR_NAMES[top], moves):
        refusal = (f"its median color (L* {median[0]:.0f}, chroma {float(np.hypot(median[1], median[2])):.0f}) lies "
                   f"near a border of {COLOR_NAMES[top]}: not clearly one name")
    return ObjectColor(COLOR_NAMES[top], share, np.median(labs[~neutral][names == top], axis=0), refusal)


def object_color(rgb: np.ndarray, mask: np.ndarray) -> ObjectColor:
    """Name the masked object from its own body (module docstring "Naming an object"); ties go to the
    earlier vocabulary name."""
    body = body_pixels(mask)
    labs = rgb_to_lab(rgb[body])
    if labs.shape[0] == 0:
        return ObjectColor(COLOR_NAMES[0], 0.0, np.zeros(3, dtype=np.float32), "empty mask")
    named = _name_body(labs)
    foreign = surround_colored(rgb, mask, body)
    own = labs[~foreign]
    if named.refusal is None and foreign.mean() >= MIN_FOREIGN_SHARE and own.shape[0] >= MIN_BODY_SHARE * labs.shape[0]:
        alone = _name_body(own)  # the pixels unlike the surroundings: see-through shapes show the background
        if alone.name != named.name:
            return ObjectColor(named.name, named.share, named.lab,
                               f"{foreign.mean():.0%} of its body has its surroundings' colors ({named.name}); the "
                               f"rest reads {alone.name}: see-through or blending in")
    return named


MONOCHROME_MAX_CHROMATIC = 0.01


def is_monochrome(rgb: np.ndarray) -> bool:
    """True for a black-and-white (or sepia-free gray) photo: fewer than 1% of its pixels (every
    4th row and column) reach the achromatic chroma limit. Nothing in such a photo is recolored."""
    lab = rgb_to_lab(np.ascontiguousarray(rgb[::4, ::4]))
    return float((np.hypot(lab[..., 1], lab[..., 2]) >= ACHROMATIC_CHROMA).mean()) < MONOCHROME_MAX_CHROMATIC


def name_object_color(rgb: np.ndarray, mask: np.ndarray) -> str:
    return object_color(rgb, mask).name


CERTIFIED_TARGETS: tuple[str, ...] = tuple(
    name for name in COLOR_NAMES
    if _name_body(np.repeat(PROTOTYPES_LAB[name][None, :], 16, axis=0), ()).name == name
    and _name_body(np.repeat(PROTOTYPES_LAB[name][None, :], 16, axis=0), ()).refusal is None)
"""The colors whose prototype, as a flat object, the naming rule names without refusal (module docstring);
how clearly a target reads is asked of the recoloured object itself, at the lightness it takes
(recolour._reads_as), not of the prototype."""


def distinct_targets(current: ObjectColor, min_delta_e: float, palette: tuple[str, ...] = COLOR_NAMES,
                     candidates: tuple[str, ...] = CERTIFIED_TARGETS) -> list[str]:
    """The colors of `candidates` (by default the recolor targets, CERTIFIED_TARGETS; a question's
    distractors pass every name) in `palette` whose prototype lies at least min_delta_e (CIE76) from
    the object's color; none for an object without a dominant color."""
    if not current.dominant:
        return []
    return [
        name
        for name in candidates
        if name in palette and name != current.name
        and float(np.linalg.norm(PROTOTYPES_LAB[name] - current.lab)) >= min_delta_e
    ]
