"""Recolour rendering (builders/recolour.py): the outline refined, shading kept, no fringe, no spill, refusals.

Cases from the issue-29 audit of VFaith, on the embedded COCO sample (the package's own images, so a clean
checkout has them): each failed before the recolour was rewritten (the polygon painted flat).
"""
from __future__ import annotations

import numpy as np
import pytest

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.colors import name_object_color, rgb_to_lab
from mmfaith.builders.edits import dilate, edit_color
from mmfaith.builders.recolour import (BAND, BLACK_QUANTILE, MAX_CLIPPED_SHARE, MAX_TARGET_L, MIN_SHADE_L, SHADE_QUANTILE,
                                       WHITE_TARGET_L, ObjectPaint, _luminance, _srgb_to_linear, recolour)
from mmfaith.builders.scene_view import SceneView
from mmfaith.builders.targets import TargetRules
from mmfaith.images import read_rgb


def _object(sample, image_id: int, ann_id: int) -> tuple[np.ndarray, np.ndarray, SceneView]:
    scene = CocoSource(*sample).scene(image_id)
    rgb = read_rgb(scene.path, 10**8)
    view = SceneView(scene, rgb, 7, 3, TargetRules("patchmatch"))
    return rgb, view.masks[ann_id], view


def _disc_scene(offset: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A shaded orange disc on a textured blue-gray ground, and a polygon mask shifted `offset` pixels right
    (a COCO outline that cuts into the object on the left and strays onto the ground on the right)."""
    rng = np.random.default_rng(0)
    height, width, radius = 120, 160, 40
    yy, xx = np.mgrid[:height, :width]
    disc = (yy - 60) ** 2 + (xx - 80) ** 2 <= radius ** 2
    ground = np.stack([90 + 0 * xx, 100 + 0 * xx, 120 + 0 * xx], axis=-1).astype(np.float32)
    ground += rng.normal(0, 3, ground.shape)
    shade = 0.6 + 0.4 * (xx - 40) / 80.0  # lit from the right
    orange = np.array([230, 120, 30], dtype=np.float32)
    rgb = np.where(disc[..., None], orange * shade[..., None], ground)
    rgb = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    polygon = (yy - 60) ** 2 + (xx - 80 - offset) ** 2 <= radius ** 2
    return rgb, disc, polygon


def test_a_misaligned_outline_leaves_no_fringe_and_no_spill() -> None:
    # Before: the polygon itself was painted, so the disc's left rim (3 px) kept its orange and the ground on
    # the right turned blue (3 px of full paint). Now the refined outline follows the disc: inside its rim no
    # disc pixel stays orange, the ground within 2 px of it changes only by the soft edge's blend, beyond that
    # not at all.
    rgb, disc, polygon = _disc_scene(offset=3)
    painted = recolour(rgb, polygon, "blue")
    rim = dilate(disc, 1) & ~_eroded(disc, 1)
    inside = disc & ~rim
    assert name_object_color(painted.image, inside) == "blue"
    still_orange = (np.abs(painted.image[inside].astype(int) - rgb[inside].astype(int)).max(axis=1) < 10).mean()
    assert still_orange == 0.0
    edge = dilate(disc, 2) & ~disc
    assert np.abs(painted.image[edge].astype(int) - rgb[edge].astype(int)).max() <= 50
    ground = ~dilate(disc, 2)
    assert not np.any(painted.image[ground] != rgb[ground])
    assert not np.any(painted.image[~painted.region] != rgb[~painted.region])


def _eroded(mask: np.ndarray, radius: int) -> np.ndarray:
    return ~dilate(~mask, radius)


def test_shading_is_kept() -> None:
    # The disc's left-to-right lighting survives: luminance before and after correlate (a flat paint gives ~0).
    rgb, disc, _ = _disc_scene(offset=0)
    painted = recolour(rgb, disc, "green")
    before = _luminance(_srgb_to_linear(rgb[disc]))
    after = _luminance(_srgb_to_linear(painted.image[disc]))
    assert np.corrcoef(before, after)[0, 1] > 0.95
    assert name_object_color(painted.image, disc) == "green"


def test_the_recolour_is_deterministic(sample) -> None:
    rgb, mask, _ = _object(sample, 572, 1183836)
    assert np.array_equal(recolour(rgb, mask, "green").image, recolour(rgb, mask, "green").image)


def test_a_dark_suitcase_becomes_dark_green_with_its_seams(sample) -> None:
    # COCO 572's black suitcase: before, painted the prototype's mid green, flat. Now its lightness stays near
    # its own and its shading (seams, pockets) stays where it was; nothing outside the edit's region changes.
    rgb, mask, view = _object(sample, 572, 1183836)
    assert view.paint(1183836).refusal("green") is None
    outcome = edit_color(rgb, mask, "green")
    support = outcome.evidence
    assert name_object_color(outcome.image, mask) == "green"
    before = _luminance(_srgb_to_linear(rgb[support]))
    after = _luminance(_srgb_to_linear(outcome.image[support]))
    assert np.corrcoef(before, after)[0, 1] > 0.8
    assert not np.any(outcome.image[~outcome.allowed] != rgb[~outcome.allowed])
    assert not (outcome.allowed & ~dilate(mask, BAND + 2)).any()


@pytest.mark.parametrize(("image_id", "ann_id", "target", "why"), [
    (89, 1640626, "brown", "no brown"),          # a near-black microwave: its pixels are JPEG noise, not shading
    (164, 1960665, "blue", "too small"),         # a table's polygon that is mostly wall, cut by the border
    (164, 1119489, "green", "too small"),        # a microwave polygon holding its see-through window's glare (refused
    #                                              "not the object" too; under MIN_PIXELS since issue 29's audit)
    (572, 1183836, "pink", "leans to pink"),     # a dark purple suitcase: "pink" (by hue alone) reads plum
])
def test_untrustworthy_recolours_are_refused(sample, image_id: int, ann_id: int, target: str, why: str) -> None:
    _, _, view = _object(sample, image_id, ann_id)
    refusal = ObjectPaint(view.rgb, view.masks[ann_id]).refusal(target)
    assert refusal is not None and why in refusal
    assert target not in view.color_targets(ann_id)


def test_a_light_target_is_vivid_enough_to_name(sample) -> None:
    # COCO 30's white vase made "blue" came out pale lavender (blue or white?); now the chroma is at least half
    # its lightness, and the vase's ribs (its shading) stay.
    rgb, mask, view = _object(sample, 30, 1155486)
    assert view.paint(1155486).refusal("blue") is None
    outcome = edit_color(rgb, mask, "blue")
    lab = rgb_to_lab(outcome.image[outcome.evidence])
    lightness, a, b = np.median(lab, axis=0)
    assert np.hypot(a, b) >= 0.5 * lightness
    assert np.corrcoef(rgb_to_lab(rgb[outcome.evidence])[:, 0], lab[:, 0])[0, 1] > 0.8


def test_see_through_shapes_are_never_recoloured(sample) -> None:
    # COCO 74's bicycle: its polygon holds the pavement seen through the wheels, which a recolour painted green.
    _, _, view = _object(sample, 74, 128367)
    assert view.color_targets(128367) == []
    assert TargetRules().color_palette("chair") == ()


def test_a_target_the_object_already_leans_to_is_refused(sample) -> None:
    # COCO 572's suitcase was named black (the naming refuses it now: dark navy-purple) and is visibly dark purple:
    # made purple, the photo's own answer would be in doubt ("black" or "purple"). Gray and green stay open.
    _, _, view = _object(sample, 572, 1183836)
    paint = view.paint(1183836)
    assert "leans to purple" in (paint.refusal("purple") or "")
    assert paint.refusal("gray") is None and paint.refusal("green") is None


def test_a_glass_table_holding_a_reflection_is_never_recoloured(sample) -> None:
    # COCO 283's glass table (named gray) mirrors the bottle standing on it and shows the chair through it: recoloured
    # orange, the bottle's reflection and the chair legs turned orange too (issue 29 audit). The wooden table of
    # COCO 113 holds no reflection and stays recolourable.
    _, _, view = _object(sample, 283, 120535)
    assert view.holds_reflection(120535) and view.color_targets(120535) == []
    _, _, wooden = _object(sample, 113, 1616846)
    assert not wooden.holds_reflection(1616846) and wooden.color_targets(1616846)


@pytest.mark.parametrize("target", ["red", "yellow", "green"])
def test_a_light_object_takes_the_least_chroma_that_names_the_target(sample, target: str) -> None:
    # Issue 29's audit: COCO 30's white fluted vase painted red, yellow or green came out neon and flat (the target
    # prototype's full chroma; "saturated flat paint, fluting barely visible"). Now the albedo keeps only the chroma
    # that reads clearly as the target (one step of CHROMA_KEEPS more): the result is still named the target, its
    # median chroma lies well under the full-chroma rendering's, and the ribs (lightness) follow the photo's.
    rgb, mask, view = _object(sample, 30, 1155486)
    paint = view.paint(1155486)
    assert paint.refusal(target) is None
    outcome = edit_color(rgb, mask, target)
    lab = rgb_to_lab(outcome.image[outcome.evidence])
    assert name_object_color(outcome.image, outcome.evidence) == target
    lightness, keep = paint._lightness(target, bounded=True)
    assert keep < 1.0
    full = rgb_to_lab(paint._render(paint.sample, target, lightness, 1.0))
    chroma, full_chroma = (float(np.median(np.hypot(v[:, 1], v[:, 2]))) for v in (lab, full))
    assert chroma < 0.9 * full_chroma
    assert np.corrcoef(rgb_to_lab(rgb[outcome.evidence])[:, 0], lab[:, 0])[0, 1] > 0.8


def test_a_white_target_is_white_not_light_gray(sample) -> None:
    # Issue 29's audit (SPD-Faith): COCO 315's front green beach umbrella made "white" came out light gray (its canopy
    # is in shade); a person answered gray. A white rendering now has a median lightness of WHITE_TARGET_L or more.
    rgb, mask, view = _object(sample, 315, 287944)
    assert view.paint(287944).refusal("white") is None
    outcome = edit_color(rgb, mask, "white")
    assert float(np.median(rgb_to_lab(outcome.image[outcome.evidence])[:, 0])) >= WHITE_TARGET_L


def test_a_target_the_neighbours_have_is_refused(sample) -> None:
    # Issue 29's audit (SPD-Faith): COCO 315's yellow umbrella, cut by the left border beside a green one, painted green
    # read as a panel of its neighbour. Green lies on NEIGHBOUR_SHARE or more of the ring around it: refused; white
    # (accepted by the annotator) stays.
    _, _, view = _object(sample, 315, 287981)
    assert view.paint(287981).refusal("green") is None  # the paint alone would allow it
    assert "green" not in view.color_targets(287981) and "white" in view.color_targets(287981)


def test_a_light_pattern_on_a_dark_object_is_never_recoloured(sample) -> None:
    # Issue 29's audit (SPD-Faith): COCO 127's small closed black umbrella carries a white logo, painted tan or light
    # green with the cloth; over MAX_CLIPPED_SHARE of its pixels are over MAX_SHADING times its median luminance (it
    # is refused as too small first now). The rule itself on a larger case: a dark disc with a white band (a
    # printed logo) on 10 % of it is refused; the same disc without the band is not.
    _, _, view = _object(sample, 127, 2074775)
    assert view.paint(2074775).clipped > MAX_CLIPPED_SHARE and view.color_targets(2074775) == []
    rgb, disc, _ = _disc_scene(offset=0)
    dark = np.where(disc[..., None], (rgb.astype(np.float32) * 0.45).astype(np.uint8), rgb)
    row = np.arange(disc.shape[0])[:, None]
    band = disc & (row >= 57) & (row < 63)  # six rows through the disc's middle
    assert 0.08 < band.sum() / disc.sum() < 0.12
    logo = np.where(band[..., None], np.uint8(240), dark)
    assert "light pattern" in (ObjectPaint(logo, disc).refusal("green") or "")
    assert "light pattern" not in (ObjectPaint(dark, disc).refusal("green") or "")




@pytest.mark.parametrize(("image_id", "ann_id", "target"), [
    (30, 1155486, "blue"), (315, 287981, "blue"), (30, 1155486, "green"), (315, 287944, "black"),
    (113, 1616846, "black")])
def test_blue_green_and_black_renderings_stay_dark(sample, image_id: int, ann_id: int, target: str) -> None:
    # Issue 29's audit: COCO 30's white vase and COCO 315's yellow umbrella made "blue" came out periwinkle (blue or
    # purple?), COCO 491's white teddy bear made "green" neon mint and "black" charcoal gray (its lit fur). A blue or
    # green rendering now has a median lightness of at most MAX_TARGET_L (45, 60), a black one an upper quartile of
    # at most 20.
    rgb, mask, view = _object(sample, image_id, ann_id)
    assert view.paint(ann_id).refusal(target) is None
    outcome = edit_color(rgb, mask, target)
    lightness = rgb_to_lab(outcome.image[outcome.evidence])[:, 0]
    quantile = BLACK_QUANTILE if target == "black" else 50.0
    assert float(np.percentile(lightness, quantile)) <= MAX_TARGET_L[target]


def test_a_shaded_canopy_is_neither_white_nor_yellow(sample) -> None:
    # Issue 29's audit: COCO 315's front green umbrella made "white" read gray and made "yellow" olive on its shaded
    # lower half. Yellow is refused now (no lightness keeps its shade at MIN_SHADE_L); white only where all but
    # SHADE_QUANTILE of it is at least MIN_SHADE_L. The umbrella beside it, in the sun, stays white.
    for ann_id, refused in ((287944, "yellow"), (287981, None)):
        rgb, mask, view = _object(sample, 315, ann_id)
        assert refused is None or "no yellow" in (view.paint(ann_id).refusal(refused) or "")
        outcome = edit_color(rgb, mask, "white")
        lightness = rgb_to_lab(outcome.image[outcome.evidence])[:, 0]
        assert float(np.percentile(lightness, SHADE_QUANTILE)) >= MIN_SHADE_L
