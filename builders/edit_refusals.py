"""Refusals of edit targets on top of the shared target rules (builders/targets.py, builders/scene_view.py), from
issue 29's audit of what a careful annotator rejects: found on SPD-Faith's edits and obeyed by every family that
removes, moves or recolours COCO objects (SPD-Faith's planner, VFaith's question edits and crops).

Removal and moves (`removal_refusal`) are refused for:
- people (targets.PEOPLE): a removed or moved person leaves a person-shaped smear, a shadow, or a figure on nothing
  (a player's shadow on the grass, a ghost on a lawn);
- fixtures (FIXTURES): things attached to the scene (sinks, toilets, ovens, refrigerators, microwaves,
  traffic lights, fire hydrants, stop signs, parking meters, wall clocks): taken away, they leave what held
  them cut in mid-air (a traffic light's gantry arm stopping short) or a wall with nothing where something
  must be;
- held things: an object with HELD_SHARE (25 %) or more of its mask inside a person's box (the person's
  hands and arms are there: a racket removed from raised hands leaves a smudge between them).

Recolours (`recolour_refusal`) are refused for:
- fitted appliances, cups and sinks (NOT_RECOLOURED): their colour is their material (steel, enamel,
  ceramic, glass), and a painted one reads as a wrong answer key or as paint on a reflection;
- teal objects: a body whose median CIELAB hue lies within TEAL_HUES (175 to 235 degrees) with a chroma of
  at least TEAL_MIN_CHROMA sits on the green-blue border, so its "before" colour has no one name (a teal
  toothbrush at 176 degrees named green; the beach umbrella of COCO 315 at 172 degrees reads green);
- a worn thing (WORN: ties, backpacks, handbags with HELD_SHARE of their mask inside a person's box) that
  is not whole in frame (its hole reaches the image border, or it is partly hidden: targets.partly_hidden_reason):
  what is left of it is a strap nobody can name (a backpack seen as a shoulder strap);
- fruit (FRUIT: bananas, apples, oranges): the palette names a skin's colours (a green banana is unripe), but a
  cut fruit shows its flesh, which has none of them (sliced banana painted green reads as cucumber, COCO 142);
- a thing in an animal's fur (FUR_SHARE, a fifth, or more of the ring FUR_RING px around its mask on an
  animal's mask: held in a mouth, lain on): fur crosses its edge where no outline can follow, and the old colour
  stays between the hairs (a purple frisbee in a dog's mouth made brown kept a purple fringe, COCO 394).
"""
from __future__ import annotations

import numpy as np

from mmfaith.builders.colors import body_pixels, hue_degrees, rgb_to_lab
from mmfaith.builders.edits import dilate
from mmfaith.builders.scene_view import SceneView
from mmfaith.builders.targets import PEOPLE, box_mask, partly_hidden_reason

FIXTURES = frozenset({"sink", "toilet", "oven", "refrigerator", "microwave", "traffic light", "fire hydrant",
                      "stop sign", "parking meter", "clock"})
NOT_RECOLOURED = frozenset({"oven", "microwave", "refrigerator", "toaster", "sink", "toilet", "cup"})
WORN = frozenset({"tie", "backpack", "handbag"})
FRUIT = frozenset({"banana", "apple", "orange"})
ANIMALS = frozenset({"bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe"})
"""COCO's animal kinds (supercategory animal)."""
FUR_RING = 3
FUR_SHARE = 0.2
HELD_SHARE = 0.25
TEAL_HUES = (175.0, 235.0)
TEAL_MIN_CHROMA = 10.0


def held_by(view: SceneView, ann_id: int, holders: frozenset[str] = PEOPLE) -> int | None:
    """The annotation id of the first instance of a `holders` kind (people by default; not the object itself) whose
    box holds HELD_SHARE or more of the object's mask, or None."""
    mask = view.masks[ann_id]
    area = view.area(ann_id)
    height, width = mask.shape
    for other_id, inst in view.instances.items():
        if other_id != ann_id and inst.category in holders and area and \
                float((mask & box_mask(inst.bbox, height, width)).sum()) >= HELD_SHARE * area:
            return other_id
    return None


def removal_refusal(view: SceneView, ann_id: int) -> str | None:
    """Why SPD-Faith does not remove or move the object (module docstring), or None."""
    category = view.instances[ann_id].category
    if category in PEOPLE:
        return "a person: removed or moved, a smear, a shadow or a figure on nothing stays"
    if category in FIXTURES:
        return f"a fixture ({category}): what holds it would be cut in mid-air"
    holder = held_by(view, ann_id)
    if holder is not None:
        return f"held: {HELD_SHARE:.0%} or more of it lies in the box of person {holder}"
    return None


def teal(view: SceneView, ann_id: int) -> bool:
    """True when the object's body has a median CIELAB hue within TEAL_HUES and a chroma of TEAL_MIN_CHROMA."""
    labs = rgb_to_lab(view.rgb[body_pixels(view.masks[ann_id])])
    if not labs.shape[0]:
        return False
    _, a, b = (float(v) for v in np.median(labs, axis=0))
    hue = float(hue_degrees(a, b))
    return bool(np.hypot(a, b) >= TEAL_MIN_CHROMA and TEAL_HUES[0] <= hue <= TEAL_HUES[1])


def fur_share(view: SceneView, ann_id: int) -> float:
    """The share of the ring FUR_RING px around the object's mask that lies on another instance's mask of an animal."""
    mask = view.masks[ann_id]
    ring = dilate(mask, FUR_RING) & ~mask
    fur = np.zeros_like(mask)
    for other_id, inst in view.instances.items():
        if other_id != ann_id and inst.category in ANIMALS:
            fur |= view.masks[other_id]
    return float((ring & fur).sum() / ring.sum()) if ring.any() else 0.0


def recolour_refusal(view: SceneView, ann_id: int) -> str | None:
    """Why SPD-Faith does not recolour the object (module docstring), or None."""
    category = view.instances[ann_id].category
    if category in NOT_RECOLOURED:
        return f"its colour is its material ({category})"
    if category in FRUIT:
        return f"fruit ({category}): the palette names its skin, and a cut one shows flesh"
    if fur_share(view, ann_id) >= FUR_SHARE:
        return f"in an animal's fur: {FUR_SHARE:.0%} or more of its outline runs along an animal"
    if teal(view, ann_id):
        return "teal: between green and blue, its colour has no one name"
    if category in WORN and held_by(view, ann_id) is not None:
        if view.hole_touches_border(ann_id):
            return f"a worn {category} cut by the image border"
        hidden = partly_hidden_reason(ann_id, view.masks, view.boxes)
        if hidden is not None:
            return f"a worn {category}, {hidden}"
    return None
