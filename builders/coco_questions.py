"""Multiple-choice questions whose answer is decided by annotated COCO objects (shared by every family).

VFaith edits the deciding object so that another option becomes correct, CRM masks it, MCoT asks
about it when it is small; all three take their offline questions from `scene_questions`, so a
question means the same thing in every family. docs/questions.md states the rules below with
examples.

Templates (`Question.facts` in brackets):
- color: "What color is the {object}?" about a category with exactly one instance in the image
  [category, color]. The object must have a dominant colour name (builders/colors.py "Naming an
  object": one name on at least 45% of its body, no refusal for an achromatic body between black,
  gray and white in shade, a split between two names, or a see-through shape) that is one its
  category plausibly has (targets.COLOR_PALETTES: a fork
  that reflects a chocolate cake is not asked about as "brown"; categories without a palette, such
  as plants, food, bowls and glasses, get no colour question); none in a monochrome photo, none
  about people (their colour is their clothes'), and none about an object that is partly hidden or
  holds other objects (targets.movable_reason: its mask then often includes what sits on it or
  hides it). With `color_of_surfaces` (VFaith, whose recolour paints only an outline that
  builders/recolour.py trusts), a surface (RELATION_SURFACES) is asked its colour all the same: it
  holds things and runs on under them by nature, so its mask always fills little of its box (the
  wooden table of COCO 113 under a cake, whose recolours SPD-Faith's audit accepted), unless it runs
  out of the photo on both sides: then it is the ground of a close-up, not a thing one points at (the
  speckled counter under COCO 142's breakfast, "brown" or "gray"?). Distractors: colours plausible
  for the category first (targets.COLOR_PALETTES), then other basic colours; each at least
  DEFAULT_MIN_DELTA_E (CIE76) from the object's colour and carried by less than SECONDARY_SHARE of
  its pixels, so no distractor is also a fair answer.
  With `one_color_only` (CRM and MCoT, whose annotator judges the object's colour on the whole
  image, not on an edit), an object on which any other name holds SECONDARY_SHARE of the pixels
  gets no question at all: a yellow-and-black ball, a phone whose screen shows a blue picture, a
  dark glossy roof half blue half gray, a canopy bed, banana slices between yellow and cream (issue
  29's audit of both families). Achromatic shading does not count: gray on a white or black object
  (and white or black on a gray one) is its shade, not a second colour.
- count: "How many {objects} are there?" [category, count], 1 to max_count instances. Options are
  n consecutive numbers from 0 up that hold the count, so the gold can sit at every rank (smallest
  and largest included, as far as 0 allows); with `count_holds_one_less` (VFaith: a removal of one
  instance moves the answer to another option) they also hold count - 1. The window's start is
  drawn with the seed, or with a `QuestionBalance` the start that puts the gold at the rank least
  used so far.
- existence: "Is there {a object} in the image?" [category, count], options yes / no. Present
  (answer yes, count >= 1, evidence every instance) for every countable category, and as many
  absent ones (answer no, count 0) about categories from `absent` that the image has no
  annotation of at all, crowd included: the caller passes categories plausible for the scene
  (`plausible_absent`: they co-occur with one of its categories in another image of the source,
  or share its supercategory). An absent question's evidence is the present instance that makes
  the category plausible (its `anchor`): the object a model might infer the absent one from.
- relation: "Is the {subject} to the left or to the right of the {reference}?" [subject,
  reference, relation], two categories with one instance each whose boxes are disjoint in x by at
  least min_relation_gap of the width; options left / right. Which of the two is the subject is
  drawn with the seed, or with a `QuestionBalance` the one whose answer (left or right) is the less
  used so far. `relation_reason` refuses a pair a person could not place side by side: a surface
  that things stand or lie on (RELATION_SURFACES: a dining table, bed, couch or bench is annotated
  only where it shows between the things on it and runs on behind and under them, so a fork on the
  table of COCO 397 is neither left nor right of it), and a glimpse of a fitted appliance
  (FITTED_APPLIANCES under MIN_FITTED_AREA of the image by its box: the "oven" of COCO 164 is a
  corner of a stovetop between a jug and a paper-towel roll, which nobody could point at).

COCO annotates instances incompletely, and a crowd region stands for an uncounted group: a
category with any crowd annotation in the image gets no question at all, and every instance a
question depends on must cover at least min_instance_area of the image (by its box), or a small,
likely unannotated twin could make count and existence wrong, and must be nameable
(targets.nameable_reason: not a tiny shape, a sliver cut by the border, or a blur like its
surroundings), or a person could not check the answer. Counts and present existence are
stricter (issue 29's audit: stacks of books, rows of benches, handbags and bottles among clutter
were counts nobody could check, and their unannotated twins stayed visible under CRM's masks):
every instance of the category must cover at least min_counted_area (1 %). An absent object is
asked about only when the scene holds no crowd region and no instance under min_counted_area of
its supercategory (a motorcycle cannot be ruled out among dozens of tiny annotated cars), and only
when the category's instances across the source usually cover min_counted_area (their median box
area; `CategoryContext.typical_area`): a category that is mostly small (traffic lights, handbags,
cars, bottles, cups in COCO) stands unannotated in the background of many scenes, so "no traffic
light" at night among many small lights, or "no handbag" in a dense crowd, cannot be confirmed
(issue 29's CRM audit). Usually small, usually alone: with a `KindStats` table given (`kinds`: CRM
passes the shipped COCO table, builders/coco_kinds.py, since a median over the one or two instances
a small source holds of a kind says nothing about it), count and existence (present and absent) ask
only about categories whose median box covers min_counted_area and that are usually alone (at least
ALONE_SHARE of the images holding them hold one instance), and colour and relation ("the X") only
about categories usually alone and objects covering min_counted_area, for the same reason: a present car, cup, bottle, book, clock, knife or
chair that is large enough here mostly has smaller, unannotated twins in the background (a white
pickup behind the one annotated car of COCO 64), and a kind that usually comes in groups (persons,
chairs, cups, trucks, bicycles, teddy bears) is the kind annotators leave partly unannotated (a
plush turtle beside the two annotated teddy bears of 643, a blurred second bicycle down the street of
74, a second pickup in 64, a face in a side mirror called "the person" in 151, a slatted seat under
"no chair" in 136, a small terracotta jug called "the vase" in 138 beside a larger unannotated one), so its "2", "yes", "no" or "the X" cannot be checked; an absent question may still
take such an instance as the anchor (the anchor is masked, not asked about). With `whole_objects` (CRM, whose
masks cover the annotated boxes), count, present existence and relation (the questions whose answer
is which objects are there and where) ask only about objects that stand whole in their boxes: not
partly hidden (targets.partly_hidden_reason: its mask fills under 30 % of its box, or other objects
cover over 25 % of it: the "fork" of COCO 196 is a salad server whose handle runs on past its
annotation, the "backpack" of 389 a strap across a shirt), and not a fitted appliance
(FITTED_APPLIANCES: an oven's box is its front, and the stovetop and hood above it still show
where the range is); nor is a fitted appliance
asked its colour (its front, body and cooktop differ: a teal stove with a black cooktop was named
black, a stainless range with black grates too). Sizes
are box areas over the image area throughout. With max_subject_area set (V*-style small targets), the object asked about (the
colour's object, the relation's subject, every counted instance) must be smaller than that.

Balance (docs/questions.md): a build passes one `QuestionBalance` to every scene and records in it
the questions it keeps; the generator's free choices (count window, relation subject, the gold's
letter) then go to whatever is least used so far within the template (a build whose later stages
reject made items settles the letter again over what it keeps: `GoldCap.lettered`), so a blind guess (always A,
always "right", "the second smallest number") earns chance and not more. Without one, each choice
is a seeded draw. What the source decides (which colour an object has, how many there are) is
balanced by the build's cap (mmfaith/gold_balance.py).

Determinism: questions come in a fixed order (template, then category or annotation ids), and each
question's random choices come from a generator seeded from (seed, key), where the key names the
template, the image and the annotations (and the balance's tallies, themselves fixed by the build
order); the same scenes, order and seed give the same questions.
"""
from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmfaith.builders.coco_source import CocoSource, Instance, Scene
from mmfaith.builders.colors import distinct_targets, is_monochrome, name_labs, object_color, rgb_to_lab
from mmfaith.builders.gates import DEFAULT_MIN_DELTA_E
from mmfaith.builders.targets import (PEOPLE, TargetRules, image_detail, movable_reason, nameable_reason,
                                      partly_hidden_reason)
from mmfaith.nouns import PLURAL_ONLY, display_name, plural, with_article
from mmfaith.vocabulary import COLOR_NAMES

TEMPLATES: tuple[str, ...] = ("color", "count", "existence", "relation")
LETTERS = "ABCDEFGHIJ"
SECONDARY_SHARE = 0.15
SHADES = {"white": {"gray"}, "black": {"gray"}, "gray": {"white", "black"}}
"""The names an achromatic object's own shading takes (module docstring, `one_color_only`)."""
RELATION_SURFACES = frozenset({"dining table", "bed", "couch", "bench"})
FITTED_APPLIANCES = frozenset({"oven", "refrigerator"})
MIN_FITTED_AREA = 0.01
ALONE_SHARE = 0.5
"""A category is usually alone when at least this share of the images holding it hold one instance."""


@dataclass(frozen=True)
class Option:
    """One answer option: its letter and its text."""

    label: str
    text: str


@dataclass(frozen=True)
class QuestionRules:
    """The thresholds of the templates (module docstring)."""

    min_instance_area: float = 0.002
    min_counted_area: float = 0.01
    max_count: int = 6
    min_relation_gap: float = 0.02
    max_subject_area: float | None = None
    n_options: int = 4
    count_holds_one_less: bool = False
    one_color_only: bool = False
    whole_objects: bool = False
    color_of_surfaces: bool = False


@dataclass(frozen=True)
class Question:
    """One question about one scene; `evidence` lists the instances that decide its answer (subject first)."""

    key: str
    template: str
    question: str
    options: tuple[Option, ...]
    answer: str
    evidence: tuple[Instance, ...]
    facts: dict[str, Any] = field(hash=False)

    @property
    def answer_text(self) -> str:
        """The gold option's text."""
        return next(option.text for option in self.options if option.label == self.answer)

    def label_of(self, text: str) -> str | None:
        """The label of the option whose text is `text`, or None."""
        return next((option.label for option in self.options if option.text == text), None)

    def regions(self) -> list[dict[str, Any]]:
        """The evidence as regions: [{"id": "ann<id>", "bbox": [x, y, w, h], "label": category}, ...]."""
        return [{"id": f"ann{inst.ann_id}", "bbox": list(inst.bbox), "label": inst.category} for inst in self.evidence]

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready view of the question (for build records and journals)."""
        return {"key": self.key, "template": self.template, "question": self.question,
                "options": [{"label": o.label, "text": o.text} for o in self.options],
                "answer": self.answer, "facts": dict(self.facts), "regions": self.regions()}


def gold_letter_counts(questions: Iterable[Question]) -> dict[str, int]:
    """How often each letter is the gold answer (a build reports it: shuffling should balance it)."""
    counts: dict[str, int] = {}
    for question in questions:
        counts[question.answer] = counts.get(question.answer, 0) + 1
    return dict(sorted(counts.items()))


def question_rng(seed: int, key: str) -> np.random.Generator:
    """The generator of one question's random choices, from the build seed and the question key."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


class QuestionBalance:
    """A build's running tallies, per template, of its kept questions' gold texts, gold letters, (count)
    gold ranks and prior ranks; the generator's free choices go to the least used (module docstring).

    The prior rank of a question is where its gold stands among its options ordered by how often each
    option text has been a gold so far (0: the most frequent, what mmfaith/gold_balance.py's prior
    answers); balancing it keeps the prior near chance where the source's golds are skewed (counts)."""

    def __init__(self) -> None:
        self.tallies: dict[tuple[str, str], Counter[Any]] = {}
        self.pending: dict[tuple[str, str], Counter[Any]] = {}
        """The choices made for the scene being asked, so its questions do not all take the same one."""

    def begin_scene(self) -> None:
        """Forget the pending choices of the previous scene (what was kept of it is recorded)."""
        self.pending = {}

    def _tally(self, kind: str, template: str) -> Counter[Any]:
        return self.tallies.setdefault((kind, template), Counter())

    def prior_rank(self, template: str, texts: Sequence[str], gold: str) -> int:
        """Where `gold` stands among `texts` ordered by gold frequency so far (ties: the given order)."""
        golds = self._tally("gold", template)
        return sorted(texts, key=lambda t: (-golds[t], texts.index(t))).index(gold)

    def record(self, question: Question) -> None:
        """Count a question the build keeps."""
        texts = [o.text for o in question.options]
        prior_rank = self.prior_rank(question.template, texts, question.answer_text)
        self._tally("prior_rank", question.template)[prior_rank] += 1
        self._tally("gold", question.template)[question.answer_text] += 1
        self._tally("letter", question.template)[question.answer] += 1
        if question.template == "count":
            numbers = sorted(int(text) for text in texts)
            self._tally("rank", question.template)[numbers.index(int(question.answer_text))] += 1

    def least(self, kind: str, template: str, choices: Sequence[Any], rng: np.random.Generator) -> Any:
        """The choice used least so far (`kind` gold, letter, rank or prior_rank), ties drawn with `rng`."""
        tally, pending = self._tally(kind, template), self.pending.setdefault((kind, template), Counter())
        low = min(tally[c] + pending[c] for c in choices)
        tied = [c for c in choices if tally[c] + pending[c] == low]
        choice = tied[int(rng.integers(len(tied)))]
        pending[choice] += 1
        return choice

    def most_frequent_first(self, template: str, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        """`texts` ordered by how often each has been a gold so far, most first (ties in a seeded order)."""
        golds, order = self._tally("gold", template), rng.permutation(len(texts))
        return [texts[i] for i in sorted(order, key=lambda i: -golds[texts[i]])]


def placed_options(texts: Sequence[str], gold: str, rng: np.random.Generator, template: str,
                    balance: QuestionBalance | None) -> tuple[tuple[Option, ...], str]:
    """The options in letter order: a seeded shuffle, or with a balance the gold at its least used letter
    (stratified assignment) and the distractors shuffled around it."""
    if balance is None:
        order = rng.permutation(len(texts))
        options = tuple(Option(LETTERS[i], texts[j]) for i, j in enumerate(order))
        return options, next(o.label for o in options if o.text == gold)
    letter = balance.least("letter", template, list(LETTERS[:len(texts)]), rng)
    others = [t for t in texts if t != gold]
    placed = [others[i] for i in rng.permutation(len(others))]
    placed.insert(LETTERS.index(letter), gold)
    return tuple(Option(LETTERS[i], text) for i, text in enumerate(placed)), letter


def balanced_window(balance: QuestionBalance, template: str, windows: Sequence[tuple[int, int]], n: int,
                    rng: np.random.Generator) -> tuple[int, int]:
    """Of candidate count options `(gold, start)` (the numbers start .. start + n - 1, gold among them), the
    one whose gold has the least used prior rank, then the least used place among the numbers, then (when
    candidates differ in gold: VFaith's two directions) the least used gold; ties drawn with `rng`."""
    texts = {w: [str(v) for v in range(w[1], w[1] + n)] for w in windows}
    prior = {w: balance.prior_rank(template, texts[w], str(w[0])) for w in windows}
    low = balance.least("prior_rank", template, sorted(set(prior.values())), rng)
    tied = [w for w in windows if prior[w] == low]
    rank = balance.least("rank", template, list(dict.fromkeys(gold - start for gold, start in tied)), rng)
    tied = [w for w in tied if w[0] - w[1] == rank]
    if len(tied) > 1:
        gold = balance.least("gold", template, [str(g) for g, _ in tied], rng)
        tied = [w for w in tied if str(w[0]) == gold]
    return tied[0]


@dataclass(frozen=True)
class KindStats:
    """How a category usually appears in COCO images (module docstring, "usually small", "usually alone"):
    in how many images it is annotated, the median box area of its non-crowd instances over the image area,
    and the share of those images that hold exactly one instance of it (crowd regions counted as instances)."""

    images: int
    median_area: float
    alone_share: float


def kind_stats(dataset: Mapping[str, Any]) -> dict[str, KindStats]:
    """Each annotated category's `KindStats` over a COCO instances dataset (its `images`, `annotations`,
    `categories`), by category name."""
    names = {c["id"]: c["name"] for c in dataset["categories"]}
    sizes = {image["id"]: float(image["width"] * image["height"]) for image in dataset["images"]}
    areas: dict[str, list[float]] = {}
    per_image: dict[str, Counter[int]] = {}
    for ann in dataset["annotations"]:
        name = names[ann["category_id"]]
        per_image.setdefault(name, Counter())[ann["image_id"]] += 1
        if not ann.get("iscrowd"):
            areas.setdefault(name, []).append(ann["bbox"][2] * ann["bbox"][3] / sizes[ann["image_id"]])
    return {name: KindStats(images=len(counts),
                            median_area=float(np.median(areas[name])) if name in areas else 0.0,
                            alone_share=sum(1 for n in counts.values() if n == 1) / len(counts))
            for name, counts in sorted(per_image.items())}


class CategoryContext:
    """Which categories of a COCO source go together: in how many images each pair is annotated (crowd
    included), and each category's supercategory; `plausible_absent` gives a scene's candidates for
    absent existence questions. Built once per source (a pass over its annotations)."""

    def __init__(self, source: CocoSource) -> None:
        by_image: dict[int, set[str]] = {}
        for ann in source.coco.dataset["annotations"]:
            by_image.setdefault(ann["image_id"], set()).add(source.categories[ann["category_id"]])
        self.together: Counter[tuple[str, str]] = Counter()
        for categories in by_image.values():
            self.together.update((a, b) for a in categories for b in categories if a != b)
        self.supercategory = {c["name"]: c.get("supercategory") for c in source.coco.dataset["categories"]}
        self.kinds = kind_stats(source.coco.dataset)
        """Each category's `KindStats` across the source."""
        self.typical_area = {category: kind.median_area for category, kind in self.kinds.items()
                             if kind.median_area > 0.0}
        """Each category's median instance box area over the image area, across the source (crowd left out)."""

    def plausible_absent(self, scene: Scene,
                         min_counted_area: float = QuestionRules.min_counted_area) -> dict[str, dict[str, int]]:
        """{absent category: {present category: strength}}: categories with no annotation in the scene that
        co-occur with a present one in other images (strength: how many; the scene cannot hold the pair,
        it lacks the absent one) or share its supercategory (strength at least 1). A category whose
        supercategory has a crowd region or an instance under `min_counted_area` of the image in the scene is
        left out: another one, unannotated, could hide among those; so is a category whose instances across the
        source are usually smaller than that (`typical_area`; one without instances in the source counts as
        small): it stands unannotated in the background of many scenes (module docstring)."""
        present = sorted({inst.category for inst in scene.instances})
        cluttered = {self.supercategory.get(inst.category) for inst in scene.instances
                     if inst.iscrowd or _area(inst, scene) < min_counted_area} - {None}
        small = {category for category in self.supercategory if self.typical_area.get(category, 0.0) < min_counted_area}
        found: dict[str, dict[str, int]] = {}
        for absent in sorted(set(self.supercategory) - set(present) - self._of(cluttered) - small):
            links = {}
            for category in present:
                shared = self.together[(absent, category)]
                group = self.supercategory[absent]
                same = group is not None and group == self.supercategory.get(category)
                if shared or same:
                    links[category] = max(shared, 1)
            if links:
                found[absent] = links
        return found

    def _of(self, supercategories: set[str | None]) -> set[str]:
        """The categories of these supercategories."""
        return {category for category, group in self.supercategory.items() if group in supercategories}


def _area(inst: Instance, scene: Scene) -> float:
    _, _, w, h = inst.bbox
    return (w * h) / float(scene.width * scene.height)


class _SceneView:
    """The instances of one scene grouped by category, with the size rules applied."""

    def __init__(self, scene: Scene, rules: QuestionRules, rgb: np.ndarray) -> None:
        self.scene, self.rules, self.rgb = scene, rules, rgb
        self._nameable: dict[int, bool] = {}
        crowded = {inst.category for inst in scene.instances if inst.iscrowd}
        groups: dict[str, list[Instance]] = {}
        for inst in scene.editable:
            groups.setdefault(inst.category, []).append(inst)
        self.groups = {cat: tuple(insts) for cat, insts in sorted(groups.items()) if cat not in crowded}
        self.crowd = frozenset(inst.ann_id for inst in scene.instances if inst.iscrowd)
        self.boxes = {inst.ann_id: inst.bbox for inst in scene.instances}

    @functools.cached_property
    def masks(self) -> dict[int, np.ndarray]:
        """Every instance's pixel mask (crowd ones too: they still occupy space), decoded once."""
        return {inst.ann_id: inst.mask(self.scene.height, self.scene.width) for inst in self.scene.instances}

    @functools.cached_property
    def detail(self) -> float:
        """The image's sharpness (targets.image_detail), computed once."""
        return image_detail(self.rgb)

    def large_enough(self, inst: Instance) -> bool:
        """At least min_instance_area of the image by its box, and nameable (targets.nameable_reason)."""
        if _area(inst, self.scene) < self.rules.min_instance_area:
            return False
        if inst.ann_id not in self._nameable:
            self._nameable[inst.ann_id] = nameable_reason(self.rgb, self.masks[inst.ann_id], self.detail) is None
        return self._nameable[inst.ann_id]

    def small_enough(self, inst: Instance) -> bool:
        limit = self.rules.max_subject_area
        return limit is None or _area(inst, self.scene) < limit

    def countable(self) -> list[tuple[str, tuple[Instance, ...]]]:
        """Categories whose every instance is large enough (and small enough, for small targets)."""
        return [(cat, insts) for cat, insts in self.groups.items()
                if len(insts) <= self.rules.max_count
                and all(self.large_enough(i) and self.small_enough(i) for i in insts)]

    def counted(self) -> list[tuple[str, tuple[Instance, ...]]]:
        """Countable categories whose every instance covers at least min_counted_area: what count and present
        existence ask about (module docstring)."""
        floor = self.rules.min_counted_area
        return [(cat, insts) for cat, insts in self.countable() if all(_area(i, self.scene) >= floor for i in insts)]

    def whole(self, category: str, insts: tuple[Instance, ...]) -> bool:
        """Whether every instance stands whole in its box (`whole_objects`, module docstring): not a fitted
        appliance and not partly hidden (targets.partly_hidden_reason)."""
        return category not in FITTED_APPLIANCES and all(
            partly_hidden_reason(inst.ann_id, self.masks, self.boxes) is None for inst in insts)

    def singles(self) -> list[Instance]:
        """Instances that are the only one of their category and large enough."""
        return [insts[0] for insts in self.groups.values() if len(insts) == 1 and self.large_enough(insts[0])]


def _color_question(view: _SceneView, inst: Instance, rgb: np.ndarray, seed: int,
                    target_rules: TargetRules, balance: QuestionBalance | None) -> Question | None:
    scene, rules = view.scene, view.rules
    mask = view.masks[inst.ann_id]
    palette = target_rules.color_palette(inst.category)
    spans_width = bool(mask[:, 0].any() and mask[:, -1].any())
    surface = rules.color_of_surfaces and inst.category in RELATION_SURFACES and not spans_width
    if not mask.any() or not surface and movable_reason(inst.ann_id, view.masks, view.boxes, view.crowd) is not None:
        return None
    current = object_color(rgb, mask)
    if not current.dominant or current.name not in palette:
        return None
    shares = np.bincount(name_labs(rgb_to_lab(rgb[mask])), minlength=len(COLOR_NAMES)) / float(mask.sum())
    secondary = {name for name, share in zip(COLOR_NAMES, shares) if share >= SECONDARY_SHARE}
    if rules.one_color_only and second_color(current.name, secondary) is not None:
        return None
    plausible = [c for c in distinct_targets(current, DEFAULT_MIN_DELTA_E, palette, COLOR_NAMES)
                 if c not in secondary]
    others = [c for c in distinct_targets(current, DEFAULT_MIN_DELTA_E, COLOR_NAMES, COLOR_NAMES)
              if c not in secondary and c not in plausible]
    key = f"color:{scene.image_id}:{inst.ann_id}"
    rng = question_rng(seed, key)
    wanted = rules.n_options - 1
    if balance is None:
        plausible = [plausible[i] for i in rng.permutation(len(plausible))]
        others = [others[i] for i in rng.permutation(len(others))]
    else:  # distractors that are frequent golds too, so the prior cannot tell the gold by its frequency
        plausible = balance.most_frequent_first("color", plausible, rng)
        others = balance.most_frequent_first("color", others, rng)
    distractors = plausible[:wanted]
    distractors += others[:wanted - len(distractors)]
    if len(distractors) < wanted:
        return None
    options, answer = placed_options([current.name, *distractors], current.name, rng, "color", balance)
    name = display_name(inst.category)
    verb = "are" if inst.category in PLURAL_ONLY else "is"
    return Question(key, "color", f"What color {verb} the {name}?", options, answer, (inst,),
                    {"category": inst.category, "color": current.name})


def second_color(name: str, frequent: set[str]) -> str | None:
    """A colour name among `frequent` (those on at least SECONDARY_SHARE of an object's pixels) other than
    `name` and its achromatic shades (gray for black and white; black and white for gray), or None."""
    others = sorted(frequent - SHADES.get(name, set()) - {name})
    return others[0] if others else None


def _count_question(view: _SceneView, category: str, insts: tuple[Instance, ...], seed: int,
                    balance: QuestionBalance | None) -> Question:
    count, n = len(insts), view.rules.n_options
    key = f"count:{view.scene.image_id}:{'+'.join(str(i.ann_id) for i in insts)}"
    rng = question_rng(seed, key)
    last = count - 1 if view.rules.count_holds_one_less else count
    starts = list(range(max(0, count - n + 1), last + 1))
    if balance is None:
        start = starts[int(rng.integers(len(starts)))]
    else:
        _, start = balanced_window(balance, "count", [(count, s) for s in starts], n, rng)
    texts = [str(value) for value in range(start, start + n)]
    options, answer = placed_options(texts, str(count), rng, "count", balance)
    name = display_name(category)
    noun = f"pairs of {name}" if category in PLURAL_ONLY else plural(name)
    return Question(key, "count", f"How many {noun} are there in the image?", options, answer, insts,
                    {"category": category, "count": count})


def _existence_text(category: str) -> str:
    name = display_name(category)
    if category in PLURAL_ONLY:
        return f"Are there {name} in the image?"
    return f"Is there {with_article(name)} in the image?"


def _existence_question(view: _SceneView, category: str, insts: tuple[Instance, ...], seed: int,
                        balance: QuestionBalance | None) -> Question:
    key = f"existence:{view.scene.image_id}:{'+'.join(str(i.ann_id) for i in insts)}"
    options, answer = placed_options(["yes", "no"], "yes", question_rng(seed, key), "existence", balance)
    return Question(key, "existence", _existence_text(category), options, answer, insts,
                    {"category": category, "count": len(insts)})


def _absent_questions(view: _SceneView, countable: list[tuple[str, tuple[Instance, ...]]],
                      absent: Mapping[str, Mapping[str, int]], seed: int,
                      balance: QuestionBalance | None) -> list[Question]:
    """As many absent existence questions as present ones (module docstring), drawn with weights = their
    strongest link to a countable present category; the anchor is that category's first instance."""
    anchors = dict(countable)
    annotated = {inst.category for inst in view.scene.instances}
    pool = []
    for category, links in sorted(absent.items()):
        linked = [(strength, present) for present, strength in links.items() if present in anchors]
        if category not in annotated and linked:
            strength, present = min(linked, key=lambda sp: (-sp[0], sp[1]))
            pool.append((category, present, strength))
    if not pool or not countable:
        return []
    rng = question_rng(seed, f"existence:{view.scene.image_id}:absent")
    weights = np.array([strength for _, _, strength in pool], dtype=float)
    picks = rng.choice(len(pool), size=min(len(countable), len(pool)), replace=False, p=weights / weights.sum())
    questions = []
    for index in sorted(int(i) for i in picks):
        category, present, _ = pool[index]
        anchor = anchors[present][0]
        key = f"existence:{view.scene.image_id}:absent:{category}"
        options, answer = placed_options(["yes", "no"], "no", question_rng(seed, key), "existence", balance)
        questions.append(Question(key, "existence", _existence_text(category), options, answer, (anchor,),
                                  {"category": category, "count": 0, "anchor": present}))
    return questions


def _relation_of(subject: Instance, reference: Instance) -> str:
    return "left" if subject.bbox[0] < reference.bbox[0] else "right"


def relation_reason(first: Instance, second: Instance, scene: Scene, rules: QuestionRules) -> str | None:
    """Why the two objects make no left/right question (module docstring, relation), or None when they do."""
    (x1, _, w1, _), (x2, _, w2, _) = first.bbox, second.bbox
    gap = max(x2 - (x1 + w1), x1 - (x2 + w2))
    if gap < rules.min_relation_gap * scene.width:
        return f"boxes {gap:.0f} pixels apart in x (< {rules.min_relation_gap:.0%} of the width)"
    for inst in (first, second):
        if inst.category in RELATION_SURFACES:
            return f"the {inst.category} is a surface things stand on: left or right of it is ill-posed"
        if inst.category in FITTED_APPLIANCES and _area(inst, scene) < MIN_FITTED_AREA:
            return (f"the {inst.category} covers {_area(inst, scene):.2%} of the image (< {MIN_FITTED_AREA:.0%}): "
                    "a glimpse of a fitted appliance")
    return None


def _relation_question(view: _SceneView, first: Instance, second: Instance, seed: int,
                       balance: QuestionBalance | None) -> Question | None:
    if relation_reason(first, second, view.scene, view.rules) is not None:
        return None
    key = f"relation:{view.scene.image_id}:{first.ann_id}+{second.ann_id}"
    rng = question_rng(seed, key)
    pairs = [(s, r) for s, r in ((first, second), (second, first)) if view.small_enough(s)]
    if not pairs:
        return None
    if balance is None:
        subject, reference = pairs[int(rng.integers(len(pairs)))]
    else:
        relation = balance.least("gold", "relation", [_relation_of(s, r) for s, r in pairs], rng)
        subject, reference = next((s, r) for s, r in pairs if _relation_of(s, r) == relation)
    relation = _relation_of(subject, reference)
    options, answer = placed_options(["left", "right"], relation, rng, "relation", balance)
    text = (f"Is the {display_name(subject.category)} to the left or to the right of the "
            f"{display_name(reference.category)}?")
    return Question(key, "relation", text, options, answer, (subject, reference),
                    {"subject": subject.category, "reference": reference.category, "relation": relation})


def usually_alone(kinds: Mapping[str, KindStats] | None, category: str) -> bool:
    """Whether images holding the category usually hold one instance of it (`ALONE_SHARE` of them; module
    docstring, "usually alone"); True without a table, False for a category the table lacks."""
    return kinds is None or (category in kinds and kinds[category].alone_share >= ALONE_SHARE)


def usually_counted(kinds: Mapping[str, KindStats] | None, category: str, rules: QuestionRules) -> bool:
    """Whether a count or an existence question may be about the category (module docstring, "usually small",
    "usually alone"): usually alone and its median box covers min_counted_area; True without a table."""
    return kinds is None or (usually_alone(kinds, category) and kinds[category].median_area >= rules.min_counted_area)


def the_one(kinds: Mapping[str, KindStats] | None, inst: Instance, scene: Scene, rules: QuestionRules) -> bool:
    """Whether a colour or relation question may call the instance "the X" (module docstring, "usually alone"):
    with a table, its kind is usually alone and it covers min_counted_area of the image (a smaller one mostly has
    unannotated twins, as counts do); True without a table."""
    return kinds is None or (usually_alone(kinds, inst.category) and _area(inst, scene) >= rules.min_counted_area)


def scene_questions(scene: Scene, rgb: np.ndarray, seed: int, templates: Sequence[str] = TEMPLATES,
                    rules: QuestionRules = QuestionRules(), target_rules: TargetRules = TargetRules(),
                    absent: Mapping[str, Mapping[str, int]] | None = None,
                    balance: QuestionBalance | None = None,
                    kinds: Mapping[str, KindStats] | None = None) -> list[Question]:
    """Every question the templates allow on one scene (module docstring), in a deterministic order.

    `rgb` is the scene's decoded HxWx3 uint8 image (colour questions read its pixels). `absent` is
    `CategoryContext.plausible_absent(scene)` (none given: no absent existence questions); `balance`
    steers the free choices (module docstring) and is only read here: the caller records what it
    keeps. `kinds` (a `KindStats` table: CRM passes `crm_kinds`; none given: no such rule) keeps count
    and existence to categories usually covering min_counted_area and usually alone, and colour and
    relation ("the X") to categories usually alone and objects covering min_counted_area (module
    docstring, "usually small", "usually alone"). Unknown template names raise ValueError.
    """
    unknown = sorted(set(templates) - set(TEMPLATES))
    if unknown:
        raise ValueError(f"unknown question template(s) {', '.join(unknown)}; known: {', '.join(TEMPLATES)}")
    view = _SceneView(scene, rules, rgb)
    if balance is not None:
        balance.begin_scene()
    questions: list[Question] = []
    if "color" in templates and not is_monochrome(rgb):
        for inst in view.singles():
            fitted = rules.whole_objects and inst.category in FITTED_APPLIANCES
            if inst.category not in PEOPLE and view.small_enough(inst) and not fitted \
                    and the_one(kinds, inst, scene, rules):
                question = _color_question(view, inst, rgb, seed, target_rules, balance)
                if question is not None:
                    questions.append(question)
    counted = view.counted()
    present = [(cat, insts) for cat, insts in counted
               if usually_counted(kinds, cat, rules) and (not rules.whole_objects or view.whole(cat, insts))]
    if "count" in templates:
        questions += [_count_question(view, cat, insts, seed, balance) for cat, insts in present]
    if "existence" in templates:
        questions += [_existence_question(view, cat, insts, seed, balance) for cat, insts in present]
        asked = {category: links for category, links in (absent or {}).items()
                 if usually_counted(kinds, category, rules)}
        questions += _absent_questions(view, counted, asked, seed, balance)
    if "relation" in templates:
        singles = [inst for inst in view.singles() if the_one(kinds, inst, scene, rules)]
        if rules.whole_objects:
            singles = [inst for inst in singles if view.whole(inst.category, (inst,))]
        for i, first in enumerate(singles):
            for second in singles[i + 1:]:
                question = _relation_question(view, first, second, seed, balance)
                if question is not None:
                    questions.append(question)
    return questions
