"""One COCO image to VFaith pairs, offline: its questions, each cue's edit, the gates (runs in a worker).

For every question the shared generator asks about the scene (builders/coco_questions.py), at most
`per_image` of each template (a seeded choice), the edit that moves the answer to another option:

| template  | question                          | edit (shared operation, builders/edits.py)       | new answer        |
|-----------|-----------------------------------|--------------------------------------------------|-------------------|
| color     | What color is the X?              | recolour X to a distractor option of its palette | that colour       |
| count     | How many Xs are there?            | crop the photo so that the only X is out of      | count - 1         |
|           |                                   | frame (builders/vfaith/reframe.py); where it may |                   |
|           |                                   | not be, remove one X (inpainter)                 |                   |
| existence | Is there a X?                     | crop the only X out of frame, or else remove it  | no                |
| relation  | Is the S left or right of the R?  | mirror the photo left to right (no pair where it | the other side    |
|           |                                   | may not be mirrored)                             |                   |

The objects obey the shared target rules (builders/targets.py, builders/scene_view.py): a recolour
target is in the category's palette and at least 40 delta E from the object's colour, and SPD-Faith's
recolour refusals hold for VFaith too (builders/edit_refusals.py, validated by SPD-Faith's audit: no
fitted appliance, cup or sink, whose colour is its material, as the dark-green oven of COCO 138 named black
and painted with the kettle on it; no teal object; no worn thing not whole in frame), and no food is
recoloured (FOOD: its colour is its ripeness or cooking, and one COCO mask often holds several pieces and
what lies between them: the slices of COCO 142's banana and the spread between them painted green), nor
anything a person or an animal grips (`_gripped_by`: the old colour fringes the grip). A
removed object carries nothing, is not partly hidden, fits the inpainter's hole limit, spares its
neighbours, its hole does not reach the image border and it has no reflection right below it
(SceneView.removal_refusal; issue 29's audit: a strip left at the border, a bottle's reflection in
a glass table after "no bottle"), and is none SPD-Faith's audit refuses (edit_refusals.removal_refusal:
a person, a fixture, a held thing; a wall clock's fill in COCO 138 left its ghost). A count is not asked of
a kind that comes in pieces (PIECES: seven slices annotated as one banana in COCO 142). A relation is
flipped by mirroring the photo left to right (edits.edit_mirror) and only so: issue 29's audit of VFaith
accepted no move in any round (the moves it let through floated or left a smear where the object stood: a
potted plant moved off its shelf onto the wall of COCO 138, seven times); both objects swap sides, nothing
is painted or filled; not in a scene holding a kind of object that usually carries writing (MIRROR_REFUSED: a
stop sign, a clock's numerals, a book, a screen, a bottle's label) and at least the generator's area
floor (QuestionRules.min_instance_area: smaller, nobody could read it), where the mirrored text would
give the edit away, and only when both objects are seen whole (nameable, not partly hidden, not cut
by the border: the audit rejected a backpack seen as a strap and a person cut by the frame).

A crop (issue 29's audit: most inpainted removals of the samples left a blotch, a smear or structure cut
across) paints nothing: the made image is a rectangle of the photo that stops short of the object, smaller than
the photo and at its scale; reframe.crop_out says where a crop's "no" or "0" can be trusted (one annotated
instance of a kind usually alone, not a surface, cutlery, kitchen appliance, potted plant or animal, no
look-alike kind annotated, a photo without a frame, at least half of the photo kept, nothing carried cut).

Gates, all recorded in `build.gates` (a failure is a rejection with its stage and reason):
- `answer`: the edited answer is an option and differs from the original; and the edited image
  really has it: a recoloured object is named the target colour by the same rule the generator
  used (colors.object_color, dominant), the mirrored subject's box is on the other side of the
  reference by the generator's gap (QuestionRules.min_relation_gap);
- `gate`: nothing outside the edit's allowed region changed (0 pixels; for a crop: no kept pixel), the change
  inside is visible (mean delta E over the cue >= min_delta_e; none for a crop, whose cue leaves the frame and
  whose gates record the kept share instead), a filled hole is neither a smear nor a blotch
  of copied content nor cut across several surfaces (gates.fill_reading: texture >= min_fill_texture,
  surround >= MIN_FILL_SURROUND, blotch <= MAX_FILL_BLOTCH).
The checks run from cheap to dear, and the first that fails rejects: a mirror's boxes are judged before
it is made (such a rejection has no pixel gate measures), then the edit, the pixel gates, a
recolour's reading, and the PNG encoding.

Everything depends only on the arguments, so a pair made in a worker is byte-identical to one made
in the main process, and ids are a hash of (dataset, image, question key, edit).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith.builders.coco_questions import Question, QuestionRules, scene_questions
from mmfaith.builders.coco_source import Scene
from mmfaith.builders.colors import object_color
from mmfaith.builders.edits import EditOutcome, edit_color, edit_mirror, edit_remove
from mmfaith.builders.gates import MAX_FILL_BLOTCH, MIN_FILL_SURROUND, fill_reading, mean_delta_e, outside_changes
from mmfaith.builders.inpainters import InpainterSpec, process_inpainter
from mmfaith.builders.scene_view import SceneView, seeded_rng
from mmfaith.builders.edit_refusals import ANIMALS, held_by, recolour_refusal, removal_refusal
from mmfaith.builders.stage_clock import StageClock
from mmfaith.builders.targets import PEOPLE, TargetRules
from mmfaith.builders.vfaith.perception import OTHER_SIDE
from mmfaith.builders.vfaith.reframe import MIN_KEPT_SHARE, Crop, crop_out
from mmfaith.images import UnreadableImage, png_bytes, read_rgb_kept, sha256_bytes
from mmfaith.jsonl import canonical_json

ID_PREFIX = "vf-"
QUESTION_RULES = QuestionRules(count_holds_one_less=True, color_of_surfaces=True)
"""The shared generator's rules for VFaith: count options hold count - 1, the answer after one removal; a lone
surface (a dining table under the things on it) is asked its colour (issue 29's audit: SPD-Faith's accepted
recolours of the wooden table of COCO 113 had no VFaith question)."""
TEMPLATE_CATEGORY = {"color": "RWS", "existence": "RWS", "count": "REA", "relation": "REA"}
"""The paper's subset each template belongs to: colour and existence are real-world perception
(RWS), counting and left/right relations ask for a reasoning step (REA). PFK, CRE and TIF come only
from cue-driven sources."""
MIRROR = "mirror"
CROP = "crop"
OPERATION = {"color": "recolor", "count": "remove", "existence": "remove", "relation": MIRROR}
"""Each template's edit; a count or an existence whose object may be cropped out of frame is cropped (`CROP`)."""
FOOD = frozenset({"banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake"})
"""COCO's food kinds (supercategory food): never recoloured (module docstring)."""
PIECES = frozenset({"banana", "apple", "orange", "broccoli", "carrot"})
"""Kinds that come in bunches, slices or florets, one COCO mask often holding several: never counted."""
MIRROR_REFUSED = frozenset({"stop sign", "parking meter", "clock", "book", "keyboard", "laptop", "tv", "cell phone",
                            "remote", "microwave", "oven", "bus", "train", "truck", "airplane", "boat", "bottle"})
"""Kinds of object that usually carry writing (signs, numerals, keys, screens, liveries, labels): a scene holding
one is never mirrored, its text would read backwards (issue 29's audit: a wine bottle's label)."""
GATE_MEASURE = "mean CIE76 delta E*ab over the edited cue (the mask; both objects' masks for a mirror)"


@dataclass(frozen=True)
class OfflineSettings:
    """What every worker needs, fixed for the whole build."""

    seed: int
    templates: tuple[str, ...]
    per_image: int
    dilation: int
    blend_radius: int
    min_delta_e: float
    min_fill_texture: float
    max_pixels: int
    inpainter: InpainterSpec
    dataset: str
    split: str
    version: str
    targets: TargetRules = TargetRules()
    rules: QuestionRules = QUESTION_RULES
    hole_cache: Path | None = None
    """Folder where this build's workers share their fills (inpainters.HoleCache); None: no cache."""


@dataclass
class QuestionOutcome:
    """A made pair (record with the photo as original, edited PNG) or a rejection, for the main process to
    present (builders/vfaith/presentation.py) and journal."""

    key: str
    template: str
    record: dict[str, Any] | None = None
    rejection: dict[str, Any] | None = None
    edited_png: bytes | None = None
    clock: StageClock = field(default_factory=StageClock)


@dataclass
class ImageOutcome:
    """Every outcome of one image, in the order the build handles them, and its original PNG when needed."""

    image_id: int
    outcomes: list[QuestionOutcome] = field(default_factory=list)
    original_png: bytes | None = None
    original_sha256: str | None = None
    rejection: dict[str, Any] | None = None
    clock: StageClock = field(default_factory=StageClock)
    """The image's share of the work (reading it, its questions and masks, its original PNG)."""
    staged: dict[str, str] = field(default_factory=dict)
    """Once a worker wrote the PNGs into the build's staging folder (builders/staging.py): final -> staged path."""


def original_path(scene: Scene) -> str:
    return f"images/original/{scene.image_id:012d}.png"


def chosen_questions(questions: list[Question], settings: OfflineSettings, image_id: int) -> list[Question]:
    """At most `per_image` questions of each template (a seeded choice), templates in the build's order;
    existence questions only about a category with one instance (removing it makes the answer "no")."""
    chosen = []
    for template in settings.templates:
        # An existence question about a category with several instances cannot flip by one removal.
        of_template = [q for q in questions if q.template == template
                       and (template != "existence" or q.facts["count"] == 1)]
        order = seeded_rng(settings.seed, "vfaith-questions", template, image_id).permutation(len(of_template))
        chosen.extend(of_template[int(i)] for i in order[:settings.per_image])
    return chosen


def make_image_pairs(scene: Scene, settings: OfflineSettings, done: frozenset[str],
                     original_sha256: str | None, templates: frozenset[str] | None = None) -> ImageOutcome:
    """Every chosen question of one scene not in `done`, edited and gated (module docstring); never raises for
    a bad plan, a failed gate or a source image that cannot be read (those are rejections).

    `templates`: only questions of these templates are made (the build's quotas still open when the
    image was handed out: a pair of a full quota would be discarded unwritten); None: all.
    """
    result = ImageOutcome(scene.image_id)
    common = {"image_id": scene.image_id, "file_name": scene.file_name}
    with result.clock.stage("plan"):
        try:
            rgb = read_rgb_kept(scene.path, settings.max_pixels)
        except UnreadableImage as exc:
            result.rejection = {**common, "slot": f"image:{scene.image_id}", "stage": "source", "reason": str(exc)}
            return result
    if (rgb.shape[1], rgb.shape[0]) != (scene.width, scene.height):
        result.rejection = {**common, "slot": f"image:{scene.image_id}", "stage": "source",
                            "reason": f"{scene.path}: image is {rgb.shape[1]}x{rgb.shape[0]} but the annotations say "
                                      f"{scene.width}x{scene.height}."}
        return result
    with result.clock.stage("plan"):
        questions = [q for q in chosen_questions(scene_questions(scene, rgb, settings.seed, settings.templates,
                                                                 settings.rules, settings.targets), settings,
                                                 scene.image_id)
                     if q.key not in done and (templates is None or q.template in templates)]
        if not questions:
            return result
        view = SceneView(scene, rgb, settings.dilation, settings.blend_radius, settings.targets)
    for question in questions:
        outcome = QuestionOutcome(question.key, question.template)
        _make_pair(question, view, settings, outcome, common)
        if outcome.record is not None:
            if original_sha256 is None and result.original_sha256 is None:
                with result.clock.stage("encode"):
                    result.original_png = png_bytes(rgb)
                    result.original_sha256 = sha256_bytes(result.original_png)
            outcome.record["image_original_sha256"] = original_sha256 or result.original_sha256
        result.outcomes.append(outcome)
    return result


@dataclass
class _Plan:
    """One question's planned edit: the cue, the operation's parameters and the answer it aims at."""

    ann_id: int
    target_text: str
    instruction: str
    color: str | None = None
    facts_edited: dict[str, Any] = field(default_factory=dict)
    operation: str = ""
    """The edit (OPERATION of the template, or CROP); set from the template when empty."""
    crop: Crop | None = None


def _plan(question: Question, view: SceneView, settings: OfflineSettings) -> _Plan | str:
    """The edit that flips the question's answer, or why there is none."""
    rng = seeded_rng(settings.seed, "vfaith-edit", question.key)
    facts = question.facts
    if question.template == "color":
        subject = question.evidence[0].ann_id
        refusal = recolour_refusal(view, subject) or ("food" if facts["category"] in FOOD else None) or \
            _gripped_by(view, subject)
        if refusal is not None:
            return f"the {facts['category']} is not recoloured: {refusal}"
        leaning = [o.text for o in question.options if o.text != facts["color"] and view.paint(subject).leans_to(o.text)]
        if leaning:
            return (f"the {facts['category']}'s own colour leans to the option {leaning[0]!r}: the photo's answer "
                    f"{facts['color']!r} would be in doubt")
        targets = view.color_targets(subject)
        choices = [o.text for o in question.options if o.text != facts["color"] and o.text in targets]
        if not choices:
            return ("no distractor option is a plausible recolour target (category palette, 40 delta E, a colour the "
                    "object can take naturally: builders/recolour.py)")
        color = choices[int(rng.integers(len(choices)))]
        return _Plan(subject, color, f"Recolour the {facts['category']} from {facts['color']} to {color}.",
                     color=color, facts_edited={**facts, "color": color})
    if question.template in ("count", "existence"):
        if question.template == "count" and facts["category"] in PIECES:
            return f"a {facts['category']} comes in pieces, often annotated as one: its count has no one answer"
        count = facts["count"] - 1
        target = "no" if question.template == "existence" else str(count)
        first = question.evidence[0].ann_id
        crop = crop_out(view, first)
        if isinstance(crop, Crop):
            return _Plan(first, target, f"Crop the photo to x,y,w,h {','.join(map(str, crop.as_json()))}, so that "
                         f"the {facts['category']} is out of frame.", facts_edited={**facts, "count": count},
                         operation=CROP, crop=crop)
        refusals = {inst.ann_id: removal_refusal(view, inst.ann_id) or view.removal_refusal(inst.ann_id)
                    for inst in question.evidence}
        removable = [ann for ann, refusal in refusals.items() if refusal is None]
        if not removable:
            return f"not cropped out of frame: {crop}; no {facts['category']} may be removed: " + "; ".join(
                f"annotation {ann}: {refusal}" for ann, refusal in refusals.items())
        ann_id = removable[int(rng.integers(len(removable)))]
        what = f"the {facts['category']}" if question.template == "existence" else f"one {facts['category']}"
        return _Plan(ann_id, target, f"Remove {what} (annotation {ann_id}).", facts_edited={**facts, "count": count})
    if question.template == "relation":
        return _relation_plan(question, view, settings.rules)
    return f"unknown template {question.template!r}"


def _gripped_by(view: SceneView, ann_id: int) -> str | None:
    """Who grips the object (edit_refusals.held_by with people and animals: HELD_SHARE of its mask in the box of a
    person or an animal, a hand or a mouth holds it), or None. Where they meet, the COCO outline is loose, and a
    recolour leaves the old colour as a fringe (the purple rim under a dog's chin of COCO 394's frisbee made
    yellow)."""
    holder = held_by(view, ann_id, PEOPLE | ANIMALS)
    if holder is None:
        return None
    return f"held by the {view.instances[holder].category} of annotation {holder}: its old colour would fringe the grip"


def _relation_plan(question: Question, view: SceneView, rules: QuestionRules) -> _Plan | str:
    """Mirror the photo (module docstring), or why it may not be mirrored (`_mirror_refusal`)."""
    facts = question.facts
    after = OTHER_SIDE[facts["relation"]]
    refusal = _mirror_refusal(question, view, rules)
    if refusal is not None:
        return f"the photo is not mirrored: {refusal}"
    return _Plan(question.evidence[0].ann_id, after, f"Mirror the photo left to right, so that the "
                 f"{facts['subject']} is to the {after} of the {facts['reference']}.",
                 facts_edited={**facts, "relation": after}, operation=MIRROR)


def _mirror_refusal(question: Question, view: SceneView, rules: QuestionRules) -> str | None:
    """Why the photo may not be mirrored for a relation question (module docstring), or None: the scene holds a
    kind of object that usually carries writing, at least the generator's area floor by its box (smaller, nobody
    could name it, let alone read it: a phone of 0.04 % of COCO 560's bathroom), or either object is not one a
    person could point at whole (not nameable, partly hidden or supporting another: targets.movable_reason; cut by
    the image border)."""
    floor = rules.min_instance_area * view.rgb.shape[0] * view.rgb.shape[1]
    written = sorted({inst.category for inst in view.scene.instances
                      if inst.category in MIRROR_REFUSED and inst.bbox[2] * inst.bbox[3] >= floor})
    if written:
        return f"it holds a {written[0]}, whose writing would read backwards"
    for inst in question.evidence:
        why = view.unnameable(inst.ann_id) or view.placement_reason(inst.ann_id) or \
            ("cut by the image border" if view.hole_touches_border(inst.ann_id) else None)
        if why is not None:
            return f"the {inst.category} is not seen whole: {why}"
    return None


def _apply(plan: _Plan, question: Question, view: SceneView, settings: OfflineSettings) -> EditOutcome:
    mask = view.masks[plan.ann_id]
    template = question.template
    if plan.operation == MIRROR:
        cue = np.zeros_like(mask)
        for inst in question.evidence:
            cue |= view.masks[inst.ann_id]
        return edit_mirror(view.rgb, cue)
    if template == "color":
        assert plan.color is not None
        return edit_color(view.rgb, mask, plan.color)
    return edit_remove(view.rgb, mask, process_inpainter(settings.inpainter, settings.hole_cache), settings.dilation)


def _colour_answer_holds(question: Question, plan: _Plan, edit: EditOutcome, view: SceneView) -> str | None:
    """Why the recoloured object does not read as the planned colour, or None when it does."""
    seen = object_color(edit.image, view.masks[plan.ann_id])
    if seen.name != plan.color or not seen.dominant:
        return (f"the recoloured {question.facts['category']} reads as {seen.name} ({seen.share:.2f} of its "
                f"pixels), not {plan.color}")
    return None


def _relation_answer_holds(question: Question, plan: _Plan, view: SceneView, settings: OfflineSettings) -> str | None:
    """Why both boxes mirrored would not put the subject on the planned side, or None when they would.

    Decided from the edit's geometry alone, so it runs before any pixel is filled.
    """
    subject, reference = question.evidence[0], question.evidence[1]
    boxes = {subject.ann_id: subject.bbox, reference.ann_id: reference.bbox}
    width = view.rgb.shape[1]
    boxes = {ann: (width - x - w, y, w, h) for ann, (x, y, w, h) in boxes.items()}
    (x, _, w, _), (rx, _, rw, _) = boxes[subject.ann_id], boxes[reference.ann_id]
    gap = settings.rules.min_relation_gap * view.rgb.shape[1]
    side = "right" if x >= rx + rw + gap else "left" if x + w <= rx - gap else None
    if side != plan.target_text:
        return (f"mirrored, the {question.facts['subject']} is not clearly to the {plan.target_text} of the "
                f"{question.facts['reference']}")
    return None


def _make_pair(question: Question, view: SceneView, settings: OfflineSettings, outcome: QuestionOutcome,
               common: dict[str, Any]) -> None:
    """Plan, edit and gate one question, cheap checks first: the plan, whether the planned answer is
    another option, a mirror's geometry (relation), then the edit (inpainting), the gates, a recolour's
    reading, and PNG encoding only for a pair that passed."""
    base = {**common, "slot": question.key, "template": question.template, "question": question.question}
    clock = outcome.clock
    with clock.stage("plan"):
        plan = _plan(question, view, settings)
    if isinstance(plan, str):
        outcome.rejection = {**base, "stage": "plan", "reason": plan}
        return
    plan.operation = plan.operation or OPERATION[question.template]
    target_label = question.label_of(plan.target_text)
    if target_label is None or target_label == question.answer:
        outcome.rejection = {**base, "stage": "answer",
                             "reason": f"the planned answer {plan.target_text!r} is not another option of the question"}
        return
    plan_json = {"ann_id": plan.ann_id, "operation": plan.operation, "target": plan.target_text,
                 "color": plan.color}
    if plan.crop is not None:
        plan_json["crop"] = plan.crop.as_json()
    record_id = ID_PREFIX + sha256_bytes(canonical_json(
        {"dataset": settings.dataset, "file_name": view.scene.file_name, "question": question.key,
         "plan": plan_json}).encode("utf-8"))[:16]

    def reject(stage: str, reason: str, gates: dict[str, Any] | None) -> None:
        outcome.rejection = {**base, "id": record_id, "stage": stage, "reason": reason, "plan": plan_json,
                             "gates": gates}

    if question.template == "relation":
        with clock.stage("plan"):
            wrong = _relation_answer_holds(question, plan, view, settings)
        if wrong is not None:
            reject("answer", wrong, None)
            return
    if plan.crop is not None:
        gates = _crop_gates(plan.crop, settings)
        with clock.stage("encode"):
            outcome.edited_png = png_bytes(plan.crop.apply(view.rgb))
            edited_sha256 = sha256_bytes(outcome.edited_png)
        outcome.record = _record(record_id, question, plan, target_label, plan_json, gates, view.scene, settings,
                                 edited_sha256)
        return
    with clock.stage("inpaint"):
        edit = _apply(plan, question, view, settings)
    rgb = view.rgb
    with clock.stage("gates"):
        delta_e = round(mean_delta_e(rgb, edit.image, edit.evidence), 3)
        outside_pixels, outside_max = outside_changes(rgb, edit.image, edit.allowed)
        fill = None if edit.hole is None else fill_reading(edit.image, edit.hole)
    gates = {"measure": GATE_MEASURE, "delta_e": delta_e, "min_delta_e": settings.min_delta_e,
             "outside_changed_pixels": outside_pixels, "outside_tolerance": 0,
             "fill_texture": fill and fill.texture, "min_fill_texture": settings.min_fill_texture,
             "fill_surround": fill and fill.surround, "min_fill_surround": MIN_FILL_SURROUND,
             "fill_blotch": fill and fill.blotch, "max_fill_blotch": MAX_FILL_BLOTCH,
             "dilation": settings.dilation, "blend_radius": settings.blend_radius}
    reasons = []
    if delta_e < settings.min_delta_e:
        reasons.append(f"the edit is invisible: mean delta E {delta_e} < {settings.min_delta_e}")
    if fill is not None:
        reasons.extend(f"the filled hole {problem}" for problem in fill.problems(settings.min_fill_texture))
    if outside_pixels:
        reasons.append(f"{outside_pixels} pixels changed outside the edited region (largest change {outside_max})")
    if reasons:
        reject("gate", "; ".join(reasons), gates)
        return
    if question.template == "color":
        with clock.stage("gates"):
            wrong = _colour_answer_holds(question, plan, edit, view)
        if wrong is not None:
            reject("answer", wrong, gates)
            return
    with clock.stage("encode"):
        outcome.edited_png = png_bytes(edit.image)
        edited_sha256 = sha256_bytes(outcome.edited_png)
    outcome.record = _record(record_id, question, plan, target_label, plan_json, gates, view.scene, settings,
                             edited_sha256)


def _crop_gates(crop: Crop, settings: OfflineSettings) -> dict[str, Any]:
    """A crop's gates: no delta E (its cue leaves the frame), no kept pixel changed (a crop copies them), the
    share of the photo kept and its least (reframe.best_crop chose it at least that)."""
    return {"measure": "crop: the kept rectangle of the photo, its pixels untouched", "delta_e": None,
            "min_delta_e": settings.min_delta_e, "outside_changed_pixels": 0, "outside_tolerance": 0,
            "kept_share": crop.share, "min_kept_share": MIN_KEPT_SHARE}


def _cues(question: Question, plan: _Plan) -> list[dict[str, Any]]:
    """The question's regions as visual cues, each named by its label and what the question reads from it."""
    facts = question.facts
    cues = []
    for region in question.regions():
        text = region["label"]
        if question.template == "color" and region["id"] == f"ann{plan.ann_id}":
            text = f"the {region['label']}, {facts['color']}"
        elif question.template == "relation":
            text = f"the {region['label']} ({'subject' if region['label'] == facts['subject'] else 'reference'})"
        cues.append({"id": region["id"], "text": text, "bbox": [float(v) for v in region["bbox"]]})
    return cues


def _record(record_id: str, question: Question, plan: _Plan, target_label: str, plan_json: dict[str, Any],
            gates: dict[str, Any], scene: Scene, settings: OfflineSettings, edited_sha256: str) -> dict[str, Any]:
    return {
        "id": record_id,
        "category": TEMPLATE_CATEGORY[question.template],
        "question": question.question,
        "question_type": "multiple-choice",
        "options": [{"label": o.label, "text": o.text} for o in question.options],
        "answer_original": question.answer,
        "answer_edited": target_label,
        "image_original": original_path(scene),
        "image_original_sha256": "",  # set by make_image_pairs once the original PNG's hash is known
        "image_edited": f"images/edited/{record_id}.png",
        "image_edited_sha256": edited_sha256,
        "visual_cues": _cues(question, plan),
        "edit": {"cue_id": f"ann{plan.ann_id}", "instruction": plan.instruction, "target_answer": plan.target_text,
                 "editor": {"name": f"mmfaith-{plan.operation}",
                            "model": settings.inpainter.name if plan.operation == "remove" else None},
                 "operation": plan.operation,
                 "attempts": [{"suggestion": plan.instruction, "verdict": "pass", "reason": "rule plan"}]},
        "source": {
            "dataset": settings.dataset, "split": settings.split, "image_id": scene.image_id, "row": None,
            "file_name": scene.file_name,
            "license": {"id": scene.license.id, "name": scene.license.name, "url": scene.license.url},
            "flickr_url": scene.flickr_url, "coco_url": scene.coco_url,
            "attribution": f"COCO 2017 image {scene.image_id} ({scene.flickr_url or scene.coco_url}), licensed "
                           f"{scene.license.name}; annotations COCO Consortium, CC BY 4.0.",
        },
        "verification": {"status": "pending", "annotators": [], "reasons": [], "notes": None, "task_id": None,
                         "time": None, "history": []},
        "build": {"mmfaith_version": settings.version, "seed": settings.seed, "slot": question.key,
                  "template": question.template, "facts": question.facts, "facts_edited": plan.facts_edited,
                  "plan": plan_json, "inpainter": {"name": settings.inpainter.name}
                  if plan.operation == "remove" else None, "gates": gates},
    }
