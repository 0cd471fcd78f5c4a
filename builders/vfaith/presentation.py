"""How a kept VFaith pair is presented: its direction, its count options and its letters, balanced per build.

A worker (offline.py) makes each pair with the source photo as the original image and the edit's
result as the edited one. The main process then presents every pair it keeps, in stream order,
with one `QuestionBalance` (builders/coco_questions.py) for the whole build, so the choices below
depend on the seed and the pairs before it only (byte-determinism whatever the workers):

- existence: the original gold is "yes" or "no", whichever the build has used less. "no" presents
  the pair reversed: the image with the object removed is the original (gold "no") and the photo
  is the edited image (gold "yes"). The edit still changes the answer (VFaith section 3.1), and a
  model that answers "yes" (or "no") whatever it sees earns 0.5 on both probes.
- count (a photo with c instances, the edit removes one): options are n consecutive numbers holding
  both c and c - 1; the original gold is c (forward) or c - 1 (reversed), at the least used prior
  rank, then the least used place among the numbers (`balanced_window`), so the original count sits
  at every rank, smallest and largest included, and the other count is always an option.
- every template: the original gold takes its least used letter (`placed_options`, stratified).

A reversed pair swaps `image_original`/`image_edited` (and their sha256), `answer_original`/
`answer_edited` and `build.facts`/`build.facts_edited`, so every field keeps its meaning for the
image it names (what the scorer, the reference models and the perception item read);
`build.source_photo` says which image is the photo ("image_original" or "image_edited"), and `edit`
still describes the operation that made the other image from the photo.
"""
from __future__ import annotations

import copy
from typing import Any

from mmfaith.builders.coco_questions import (Option, Question, QuestionBalance, balanced_window, placed_options,
                                             question_rng)
from mmfaith.builders.vfaith.perception import attach_perception, perception_item
from mmfaith.gold_balance import GoldItem

PHOTO_SIDES = ("image_original", "image_edited")


def source_photo(record: dict[str, Any]) -> str:
    """The field naming the pair's source photo ("image_original" unless the pair is reversed)."""
    return str(record["build"].get("source_photo", "image_original"))


def gold_items(records: list[dict[str, Any]]) -> list[GoldItem]:
    """Each multiple-choice pair's original and edited question as the gold balance sees them: templates
    `<template>:original` and `<template>:edited` (a cue-driven pair's template is its question type)."""
    return [GoldItem.of_record(f"{record['build'].get('template') or record['question_type']}:{side}",
                               record["options"], record[f"answer_{side}"])
            for record in records if record["options"] for side in ("original", "edited")]


def _question(record: dict[str, Any]) -> Question:
    """The record's original question, as the balance counts it."""
    options = tuple(Option(o["label"], o["text"]) for o in record["options"])
    build = record["build"]
    return Question(build["slot"], build["template"], record["question"], options, record["answer_original"], (),
                    build["facts"])


class PairPresenter:
    """The build's balance of presented pairs (module docstring); `record` every pair the build keeps."""

    def __init__(self, seed: int, n_options: int) -> None:
        self.seed, self.n_options = seed, n_options
        self.balance = QuestionBalance()

    def record(self, record: dict[str, Any]) -> None:
        """Count a kept pair (a presented one, or one read back from the journal)."""
        self.balance.record(_question(record))

    def present(self, made: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The presented copy of a worker's pair (photo as original) and its perception item."""
        build = made["build"]
        template, facts = build["template"], build["facts"]
        text = {o["label"]: o["text"] for o in made["options"]}
        gold, other = text[made["answer_original"]], text[made["answer_edited"]]
        rng = question_rng(self.seed, f"vfaith-present:{build['slot']}")
        self.balance.begin_scene()
        texts = [o["text"] for o in made["options"]]
        if template == "existence":
            wanted = self.balance.least("gold", template, [gold, other], rng)
        elif template == "count":
            count, n = int(facts["count"]), self.n_options
            starts = range(max(0, count - n + 1), count)
            number, start = balanced_window(self.balance, template, [(g, s) for g in (count, count - 1)
                                                                     for s in starts], n, rng)
            wanted, texts = str(number), [str(v) for v in range(start, start + n)]
        else:
            wanted = gold
        options, answer = placed_options(texts, wanted, rng, template, self.balance)
        record = copy.deepcopy(made)
        record["options"] = [{"label": o.label, "text": o.text} for o in options]
        if wanted != gold:
            _reverse(record)
        labels = {o.text: o.label for o in options}
        record["answer_original"] = answer
        record["answer_edited"] = labels[other if wanted == gold else gold]
        record["build"]["source_photo"] = "image_original" if wanted == gold else "image_edited"
        item = perception_item(record, self.seed)
        attach_perception(record, item)
        return record, item


def _reverse(record: dict[str, Any]) -> None:
    """Swap the two images and what is true of each (module docstring)."""
    for key in ("", "_sha256"):
        record[f"image_original{key}"], record[f"image_edited{key}"] = \
            record[f"image_edited{key}"], record[f"image_original{key}"]
    build = record["build"]
    build["facts"], build["facts_edited"] = build["facts_edited"], build["facts"]
