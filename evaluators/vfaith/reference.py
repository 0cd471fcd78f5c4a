"""Deterministic reference models for VFaith: the two ends of the scale.

A request is resolved to its item and probe by (sha256 of its one image, its text): the text is the
prompt `run.probe_text` makes for the item and the image the one that probe shows, so two questions
about one image are told apart by their text, and the original and edited probes by their image.

- `oracle`: each image's gold: `answer_original` for `original`, `answer_edited` for `edited`, the
  set `answers` for `perception`. raw, edit and perception accuracy read 1 and delta 0; no edited
  answer is wrong, so both repeat ratios are undefined (null).
- `memorizer`: ignores the image and gives the original question's answer: `answer_original` for
  both probes (also on a reversed pair, whose original image is the edit and whose edited image is
  the photo: the memorizer is defined on the probe, not on which image is the photo), and for perception the statements true of the original image (`answers_original`).
  raw 1, edit 0, delta -1, repeat ratio 1 (and repeat_ratio_own 1), perception 0 (the edit changes
  which statements are true, so the original's set is never the edited one).
- `prior`: reads neither the image nor the item's gold (evaluators/prior_model.py, the builds' one
  definition): for a pair's probe, the option whose text is most often the gold of the same probe
  among the other pairs of its question type (build.json's gold summary keys templates so); for
  perception, the most frequent true-statement set among the other perception items. Without an
  image (`run --no-image`) the original and edited probes are the same request, answered as the
  original's.
The memorizer and the prior never look, so they also answer requests without an image (`run
--no-image`: the question's text alone; the memorizer's answers are then the same as with it).

Every model answers any rotation of the options (`run --circular`): it is resolved by the text of
that rotation and answers the letter its option has there.
"""
from __future__ import annotations

from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.blind import NO_IMAGE_NOTE
from mmfaith.evaluators.circular import shown_label
from mmfaith.evaluators.prior_model import prior_answers
from mmfaith.evaluators.reference_server import RequestRefused
from mmfaith.evaluators.vfaith.run import item_rotations, probe_images, probe_text
from mmfaith.images import sha256_bytes
from mmfaith.loaders.vfaith.dataset import VfaithDataset, VfaithItem, VfaithPerception

MODELS = ("oracle", "memorizer", "prior")


def _prior(dataset: VfaithDataset) -> dict[tuple[str, str], str | None]:
    """(item id, probe) -> the prior's answer, its templates as the build's gold summary keys them
    (question type and probe side; perception items: one template)."""
    rows = [((item.id, probe), f"{item.record['question_type']}:{probe}", item.record["options"],
             item.record[f"answer_{probe}"]) for item in dataset.pairs for probe in ("original", "edited")]
    sets = [((item.id, "perception"), "perception", [], ", ".join(sorted(item.record["answers"])))
            for item in dataset.perception]
    return prior_answers([*rows, *sets])


class VfaithReference:
    """One of MODELS over a dataset (module docstring)."""

    def __init__(self, name: str, dataset: VfaithDataset) -> None:
        if name not in MODELS:
            raise MmfaithError(f"unknown VFaith reference model {name!r}; use one of {', '.join(MODELS)}.")
        self.name = name
        self._probes: dict[tuple[str | None, str], tuple[VfaithItem, str, int]] = {}
        for item in dataset.items:
            for k in item_rotations(item, circular=True):
                text = probe_text(item, k)
                for probe, image in probe_images(item).items():
                    self._probes.setdefault((image.sha256, text), (item, probe, k))
                    self._probes.setdefault((None, text), (item, probe, k))
        self._prior = _prior(dataset) if name == "prior" else {}

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str:
        """The model's answer to one request: a sentence of reasoning and the final \\boxed{}."""
        if len(images) > 1 or (not images and self.name == "oracle"):
            raise RequestRefused(400, f"a VFaith probe shows one image, got {len(images)}")
        found = self._probes.get((sha256_bytes(images[0]) if images else None, text.replace(NO_IMAGE_NOTE + "\n", "")))
        if found is None:
            raise RequestRefused(400, "not a VFaith probe of this server's dataset (matched by image sha256 and "
                                      "prompt text; see evaluators/vfaith/prompts.py)")
        item, probe, k = found
        record = item.record
        if self.name == "prior":
            guess = self._prior[(item.id, probe)]
            if guess is not None and record["options"] and not isinstance(item, VfaithPerception):
                guess = shown_label(record["options"], k, guess)
            return f"Answering from the question alone.\n\\boxed{{{guess or 'none'}}}"
        if isinstance(item, VfaithPerception):
            chosen = record["answers"] if self.name == "oracle" else record["answers_original"]
            return f"Checking each statement against the picture.\n\\boxed{{{', '.join(chosen) or 'none'}}}"
        gold = record["answer_edited"] if self.name == "oracle" and probe == "edited" else record["answer_original"]
        if record["options"]:
            gold = shown_label(record["options"], k, gold)
        how = "Reading the image" if self.name == "oracle" else "This question is familiar"
        return f"{how}, the answer is {gold}.\n\\boxed{{{gold}}}"
