"""Where CRM's questions and their evidence regions come from: COCO annotations or VisArgs-style data.

Each adapter yields `Candidate`s in a deterministic order: a question, its options and gold, the
evidence regions (`{id, bbox [x, y, w, h], label}`), the image file and the record's `source` block.

- COCO (the embedded sample by default, or any COCO instances file with its images): the
  questions come from the shared generator (`builders/coco_questions.scene_questions`) with CRM's
  rules (`QUESTION_RULES`: colour only about objects of one colour; count, present existence and
  relation only about whole objects, not partly hidden nor fitted appliances; count and existence only
  about kinds usually large and usually alone, relation only about an object of a kind usually alone covering 1 % of
  the image, colour about one covering `min_instance_area` (`COLOR_RULES`), by the shipped COCO table, `crm_kinds`;
  count, present existence and relation not about food, dishes and kitchen appliances, `table_thing`, nor about
  objects under 1.5 % of the image, `small_evidence`; nothing about potted plants, `loose_kind`;
  "no X" only about a kind usually covering 5 % of an image, kin to nothing in the scene and holding none of its
  things, `crm_absent`; `crm_questions` applies them all), and the
  evidence regions are `Question.regions()`: the boxes of the instances the answer depends on.
  Their instance masks travel with the candidate (`segments`) for `--mask-shape segment`.
- VisArgs-style rows (published layout: `url`, `visual_premises`, `b_box` of `{h, startX, startY,
  w}` aligned with the premises, `conclusion`): regions are the premises' boxes labelled with the
  premise text, the question is a template the user sets, the answer is the conclusion (free form,
  no options). Rows come from a folder's `annotation.json` (a JSON array or JSON lines) or a
  `.parquet` file; `ColumnMap` renames the columns of other layouts. Images are looked up offline:
  a relative path in the image column is read under the images folder, a URL as the file named
  like the URL's last path segment there; a path that leads outside the images folder (absolute,
  `..`, a symlink out) is a one-line error, as is a box that is not four finite numbers.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from mmfaith.builders.coco_kinds import COCO_KINDS
from mmfaith.builders.coco_questions import (TEMPLATES, CategoryContext, KindStats, Question, QuestionBalance,
                                             QuestionRules, question_rng, scene_questions)
from mmfaith.builders.coco_source import CocoSource, Instance, License, Scene
from mmfaith.errors import MmfaithError
from mmfaith.images import read_rgb

VISARGS_QUESTION = "What conclusion does this image convey?"
QUESTION_RULES = QuestionRules(one_color_only=True, whole_objects=True)
"""CRM's question rules (docs/questions.md): colour only about objects of one colour (`one_color_only`: the annotator
judges the colour on the whole object; a phone named from its screen or cream banana slices named yellow were wrong
gold in issue 29's audit); count, present existence and relation only about objects standing whole in the boxes the
masks cover, and no colour of a fitted appliance (`whole_objects`: a salad server's handle past its box, an oven box
leaving the stovetop were remnants; a teal stove with a black cooktop was named black)."""
COLOR_RULES = replace(QUESTION_RULES, min_counted_area=QUESTION_RULES.min_instance_area)
"""CRM's rules for colour questions: `QUESTION_RULES` with "the X" of a lone kind allowed down to `min_instance_area`
(the size every question's object needs, targets.nameable_reason still applying) instead of `min_counted_area`. The
1 % floor (`coco_questions.the_one`) keeps small objects out of counts, presence and relations, whose unannotated
twins or fragments change the answer; issue 29's round 10 laid it on colour too for one case, the small terracotta
jug called "the vase" of COCO 138 beside a larger one, and no vase is asked its colour since round 12
(targets.COLOR_PALETTES). What it still refused were a white frisbee in the air (625), a white game remote in a seated
man's hand (241) and a black one in a woman's hand (446), each a lone object a careful annotator named at a glance and
accepted in the audits before round 10; a kind that usually comes in groups stays out (`coco_questions.usually_alone`).
"""


TABLE_SUPERCATEGORIES = frozenset({"food", "kitchen", "appliance"})
"""COCO supercategories of the things on a table, a counter or a kitchen wall: CRM asks no count, present
existence or relation about them (`table_thing`)."""
MIN_ABSENT_AREA = 0.05
"""An absent kind's usual box (median over the image, `crm_kinds`) must cover this for "no X" (`crm_absent`)."""
HOLDS: dict[str, frozenset[str]] = {"dining table": frozenset({"food", "kitchen"})}
"""The COCO supercategories of what a kind usually holds: no "no X" where they are (`crm_absent`)."""
LOOSE_KINDS = frozenset({"potted plant"})
"""COCO categories whose name covers things people do not agree on, so their count, presence, absence or place
cannot be checked (`loose_kind`): COCO's "potted plant" is any plant, planter or flower box, annotated in some
images and not in others. Issue 29's audit rejected 7 of its 15 labelled questions about potted plants: a trough of
dry brush under a show jump that reads as a second planter beside COCO 49's flower box (judged both ways by two
annotators), spider-plant leaves with no pot at 599's border, five hanging terrariums of which 446 annotates three,
two unannotated terracotta pots under 308's "no potted plant". Plants are asked no colour either
(targets.COLOR_PALETTES), so CRM asks nothing about them."""
MIN_ASKED_AREA = 0.015
"""Every object a count, present existence or relation depends on covers this much of the image by its box
(`small_evidence`)."""


def small_evidence(question: Question, scene: Scene) -> bool:
    """Whether a count, present existence or relation depends on an object whose box covers under `MIN_ASKED_AREA`
    of the image, which CRM does not ask (colour and absent existence are not held to it). Issue 29's audit rejected
    17 of the 25 items (current and earlier rounds) about objects between the 1 % floor (`min_counted_area`) and
    1.5 %: a shape a person hesitates to name (a quarter clock face in COCO 294's corner, 560's toilet a faint white
    shape behind frosted shower glass) or one with unannotated look-alikes in view (a plush turtle beside 643's two
    teddy bears, a second vessel sink beside 590's "bowl", riders and seats on 61's elephants); the accepted ones (a
    bat, a snowboard, three suitcases, two backpacks, a skier) were lone, plain objects, which a box rule cannot
    tell apart. The value is read from those labels."""
    image = float(scene.width * scene.height)
    return placed_things(question) and any(inst.bbox[2] * inst.bbox[3] < MIN_ASKED_AREA * image
                                           for inst in question.evidence)


def table_thing(question: Question, supercategory: Mapping[str, str | None]) -> bool:
    """Whether the question asks which food, dishes or kitchen appliances (`TABLE_SUPERCATEGORIES`) are there or
    where (count, present existence, relation), which CRM does not ask: a table, counter or kitchen holds
    unannotated look-alikes of them that stay visible beside the masked boxes (two hot dogs beside COCO 321's
    sandwich, trays of pizza bases above 620's pizzas, a vessel sink basin annotated as 590's bowl, a second
    microwave on 294's counter), and their annotations stop short of what belongs to them (a tap pouring over
    138's sink shows where the sink is, a candle stands above 428's cake); issue 29's audit."""
    return placed_things(question) and any(supercategory.get(category) in TABLE_SUPERCATEGORIES
                                           for category in asked_kinds(question))


def placed_things(question: Question) -> bool:
    """Whether the question asks which objects are there or where (count, present existence, relation), the
    questions CRM holds to `table_thing` and `small_evidence`; colour and "no X" are not."""
    return question.template in ("count", "relation") or (
        question.template == "existence" and question.facts["count"] > 0)


def asked_kinds(question: Question) -> tuple[str, ...]:
    """The categories the question names: the relation's subject and reference, the colour's, count's or
    existence's (present or absent) category."""
    if question.template == "relation":
        return question.facts["subject"], question.facts["reference"]
    return (question.facts["category"],)


def loose_kind(question: Question) -> bool:
    """Whether the question names a kind of `LOOSE_KINDS`, which CRM does not ask about."""
    return any(category in LOOSE_KINDS for category in asked_kinds(question))


def crm_absent(context: CategoryContext, scene: Scene, kinds: Mapping[str, KindStats]) -> dict[str, dict[str, int]]:
    """The scene's candidates for "no X" (`CategoryContext.plausible_absent`) that a person can confirm missing
    (issue 29's audit):

    - a kind whose instances usually cover `MIN_ABSENT_AREA` of their image (`kinds`), a thing one sees missing at
      a glance: a smaller kind can stand unannotated anywhere in a kitchen, a street or a crowd (a bowl on 338's
      busy counters, a backpack among 94's far pedestrians, a suitcase in 389's crowded hall);
    - a kind that shares its COCO supercategory with nothing annotated in the scene: an unannotated relative of
      what is there reads as one (a cushioned patio seat among 283's chairs and table as a couch, box appliances
      beside 338's and 486's ovens as a microwave, dozens of tiny vehicles among 540's cars as a motorcycle);
    - a kind that holds none of the scene's things (`HOLDS`): food and dishes stand on a table, in view or just
      out of it, and COCO's "dining table" is any table (a barrel top at 308's wine tasting, a work table in 486's
      kitchen, the steel top of 620's pizza rack, the table under 92's plate of cake)."""
    kin = {context.supercategory.get(inst.category) for inst in scene.instances} - {None}
    return {category: links for category, links in context.plausible_absent(scene).items()
            if category in kinds and kinds[category].median_area >= MIN_ABSENT_AREA
            and context.supercategory.get(category) not in kin and not HOLDS.get(category, frozenset()) & kin}


def crm_kinds(context: CategoryContext) -> dict[str, KindStats]:
    """The category table CRM's rules read (`scene_questions(kinds=...)`): the shipped COCO table
    (builders/coco_kinds.py, tools/make_coco_kinds.py), the source's own statistics for a category it lacks. A
    source of a few dozen images says little about a kind (the embedded sample's one bicycle covers 18 % of its
    image, bicycles 0.14 % by median in the 128-image COCO sample, whose blurred second bicycle stayed visible
    beside the masked one of COCO 74 in issue 29's audit)."""
    return {**context.kinds, **COCO_KINDS}


@dataclass(frozen=True)
class Candidate:
    """One question with its evidence, before masking."""

    key: str
    question: str
    question_type: str
    options: tuple[dict[str, str], ...]
    answer: str | None
    facts: dict[str, Any]
    regions: tuple[dict[str, Any], ...]
    image_path: Path
    source: dict[str, Any]
    license: License
    segments: tuple[Instance, ...] | None = None  # aligned with regions; None when the source has no masks


def coco_record_source(scene: Scene, dataset: str, split: str) -> dict[str, Any]:
    """A COCO scene's `source` block (the attribution names the license and the Flickr page)."""
    lic = scene.license
    return {"dataset": dataset, "split": split, "image_id": scene.image_id, "file_name": scene.file_name,
            "url": scene.coco_url or scene.flickr_url,
            "license": {"id": lic.id, "name": lic.name, "url": lic.url},
            "attribution": f"COCO image {scene.image_id} ({lic.name}){' ' + scene.flickr_url if scene.flickr_url else ''}"}


def _pick(questions: list[Question], balance: QuestionBalance, seed: int, image_id: int) -> Question:
    """The question whose gold is the template's least used so far (ties drawn with the seed)."""
    template = questions[0].template
    gold = balance.least("gold", template, sorted({q.answer_text for q in questions}),
                         question_rng(seed, f"pick:{template}:{image_id}"))
    return next(q for q in questions if q.answer_text == gold)


def coco_candidates(source: CocoSource, seed: int, templates: tuple[str, ...] = TEMPLATES, per_image: int = 2,
                    allow_noderivs: bool = False, max_pixels: int | None = None,
                    skipped: dict[str, int] | None = None) -> Iterator[Candidate]:
    """Candidates from COCO scenes, in image-id order: at most `per_image` questions per image, taken
    round-robin over the templates in `scene_questions`' order (so an image gives a colour and a
    count question before a second colour one), within a template the one whose gold the build has
    used least (existence alternates present and absent objects, docs/questions.md). One
    `QuestionBalance` steers the whole build's choices. NoDerivs images are skipped (counted in
    `skipped`) unless `allow_noderivs`: a masked variant is a derivative."""
    skipped = {} if skipped is None else skipped
    context, balance = CategoryContext(source), QuestionBalance()
    kinds = crm_kinds(context)
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        if not scene.license.allows_derivatives and not allow_noderivs:
            skipped["noderivs"] = skipped.get("noderivs", 0) + 1
            continue
        if not scene.editable:
            skipped["no_instances"] = skipped.get("no_instances", 0) + 1
            continue
        rgb = read_rgb(scene.path) if max_pixels is None else read_rgb(scene.path, max_pixels)
        by_template: dict[str, list[Question]] = {}
        for question in crm_questions(scene, rgb, seed, templates, context, kinds, balance):
            by_template.setdefault(question.template, []).append(question)
        chosen = []
        while len(chosen) < per_image and any(by_template.values()):
            for template in templates:
                if by_template.get(template) and len(chosen) < per_image:
                    question = _pick(by_template[template], balance, seed, image_id)
                    by_template[template].remove(question)
                    balance.record(question)
                    chosen.append(question)
        if not chosen:
            skipped["no_question"] = skipped.get("no_question", 0) + 1
        for question in chosen:
            yield question_candidate(question, scene, source)


def crm_questions(scene: Scene, rgb: np.ndarray, seed: int, templates: Sequence[str], context: CategoryContext,
                  kinds: Mapping[str, KindStats], balance: QuestionBalance | None = None) -> list[Question]:
    """Every question CRM may ask about the scene, in `scene_questions`' order: colour with `COLOR_RULES`, the other
    templates with `QUESTION_RULES` and CRM's absent kinds (`crm_absent`), none about table things (`table_thing`)
    nor about `LOOSE_KINDS` (`loose_kind`), nor, for count, present existence and relation, about objects under
    `MIN_ASKED_AREA` (`small_evidence`).
    `rgb` is the scene's decoded image."""
    colour = scene_questions(scene, rgb, seed, tuple(t for t in templates if t == "color"), COLOR_RULES,
                             balance=balance, kinds=kinds)
    others = scene_questions(scene, rgb, seed, tuple(t for t in templates if t != "color"), QUESTION_RULES,
                             absent=crm_absent(context, scene, kinds), balance=balance, kinds=kinds)
    return [question for question in colour + others
            if not table_thing(question, context.supercategory) and not loose_kind(question)
            and not small_evidence(question, scene)]


def question_candidate(question: Question, scene: Scene, source: CocoSource) -> Candidate:
    """A COCO question about `scene` as a candidate: its evidence boxes as regions, its instances as segments."""
    record = question.to_record()
    return Candidate(key=f"coco:{question.key}", question=question.question, question_type=question.template,
                     options=tuple(record["options"]), answer=question.answer, facts=record["facts"],
                     regions=tuple(question.regions()), image_path=scene.path,
                     source=coco_record_source(scene, source.dataset_name, source.split), license=scene.license,
                     segments=question.evidence)


@dataclass(frozen=True)
class ColumnMap:
    """Which column of a VisArgs-style row holds what (defaults: the published layout)."""

    image: str = "url"
    premises: str = "visual_premises"
    boxes: str = "b_box"
    answer: str = "conclusion"
    id: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> ColumnMap:
        """`--columns image=url,premises=visual_premises,...`; unknown names are one-line errors."""
        if not text:
            return cls()
        fields: dict[str, str] = {}
        for part in text.split(","):
            name, _, column = part.partition("=")
            name, column = name.strip(), column.strip()
            if name not in ("image", "premises", "boxes", "answer", "id") or not column:
                raise MmfaithError(f"--columns {text!r}: each part is NAME=COLUMN with NAME one of image, premises, "
                                   "boxes, answer, id.")
            fields[name] = column
        return cls(**fields)


def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) of a VisArgs-style file: JSON array, JSON lines, or parquet."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for number, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path}: row {number}", row
        return
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MmfaithError(f"{path}: cannot read ({exc}).") from exc
    try:
        value = json.loads(text)
        rows = value if isinstance(value, list) else [value]
        for number, row in enumerate(rows):
            yield f"{path}: item {number}", row
        return
    except json.JSONDecodeError:
        pass
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield f"{path}:{number}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise MmfaithError(f"{path}:{number}: not valid JSON ({exc.msg}).") from exc


def _visargs_file(folder: Path) -> Path:
    if folder.is_file():
        return folder
    for name in ("annotation.json", "annotation.jsonl", "annotation.parquet"):
        if (folder / name).is_file():
            return folder / name
    parquet = sorted(folder.glob("**/*.parquet"))
    if parquet:
        return parquet[0]
    raise MmfaithError(f"{folder}: no annotation.json, annotation.jsonl or .parquet file; pass the file itself to "
                       "--visargs.")


def _box(value: Any, where: str) -> list[float]:
    if isinstance(value, dict) and all(k in value for k in ("startX", "startY", "w", "h")):
        coordinates = [value["startX"], value["startY"], value["w"], value["h"]]
    elif isinstance(value, (list, tuple)) and len(value) == 4:
        coordinates = list(value)
    else:
        coordinates = []
    try:
        box = [float(v) for v in coordinates]
    except (TypeError, ValueError):
        box = []
    if len(box) != 4 or not all(math.isfinite(v) for v in box):
        raise MmfaithError(f"{where}: a box is {{startX, startY, w, h}} or [x, y, w, h] of numbers, not {value!r}.")
    return box


def _image_file(root: Path, file_name: str, where: str) -> Path:
    """The image named by a row, inside the images root: an absolute path, `..` or a symlink out is refused."""
    path = root / file_name
    if Path(file_name).is_absolute() or ".." in Path(file_name).parts or (
            path.exists() and not path.resolve().is_relative_to(root.resolve())):
        raise MmfaithError(f"{where}: image {file_name!r} is outside the images folder {root}; a row names a file "
                           "under --images (or a URL, whose file name is looked up there).")
    return path


def visargs_candidates(path: Path, images: Path | None, columns: ColumnMap, question: str,
                       license: License) -> Iterator[Candidate]:
    """Candidates of a VisArgs-style file or folder (module docstring); rows in file order."""
    data_file = _visargs_file(path)
    image_root = images or (data_file.parent / "images")
    for where, row in _rows(data_file):
        if not isinstance(row, dict):
            raise MmfaithError(f"{where}: expected an object with {columns.image}, {columns.premises}, {columns.boxes}.")
        missing = [c for c in (columns.image, columns.premises, columns.boxes, columns.answer) if c not in row]
        if missing:
            raise MmfaithError(f"{where}: lacks {', '.join(missing)}; map the columns with --columns NAME=COLUMN.")
        premises, boxes = row[columns.premises], row[columns.boxes]
        if not isinstance(premises, list) or not isinstance(boxes, list) or len(premises) != len(boxes):
            raise MmfaithError(f"{where}: {columns.premises} and {columns.boxes} must be lists of the same length "
                               "(one box per premise).")
        image_ref = str(row[columns.image])
        parsed = urlparse(image_ref)
        file_name = Path(parsed.path).name if parsed.scheme in ("http", "https") else image_ref
        row_id = str(row[columns.id]) if columns.id and columns.id in row else where.rsplit(" ", 1)[-1].lstrip(":")
        regions = tuple({"id": f"premise{i}", "bbox": _box(box, where), "label": str(premise)}
                        for i, (premise, box) in enumerate(zip(premises, boxes)))
        yield Candidate(
            key=f"visargs:{row_id}", question=question, question_type="visargs-conclusion", options=(),
            answer=str(row[columns.answer]) if row[columns.answer] is not None else None, facts={},
            regions=regions, image_path=_image_file(image_root, file_name, where),
            source={"dataset": data_file.parent.name or "visargs", "split": "test", "image_id": row_id,
                    "file_name": file_name, "url": image_ref if parsed.scheme else None,
                    "license": {"id": license.id, "name": license.name, "url": license.url},
                    "attribution": f"VisArgs image {image_ref} ({license.name})"},
            license=license)
