"""VFaith's perception items (section 3.2.2): what does the edited image show?

"All the options were selected from vision cues before edit and their appearance after edit." One
item per pair that passed the gates: four statements about the edited cue, made from its state
before the edit, after it, and plausible distractors; `answers` is the set of statements true of
the edited image (one or two), `answers_original` those true of the original image (what a model
that ignores the image and remembers the scene would pick). The statements per template:

- color (c0 -> c1, distractors d1, d2 from the question's other colour options):
  "The X is c1." (edited), "The X is c0." (original), "The X is d1.", "The X is d2." (neither);
- count (n -> n-1, or n-1 -> n for a reversed pair, builders/vfaith/presentation.py): "There are
  exactly n-1 / n / n+1 Xs." and "There is at least one X." (true where it is);
- existence (1 -> 0, or 0 -> 1 reversed): "There is a X." and "There is no X." (each true where it
  is), "There are two Xs.", "There are at least three Xs." (neither);
- relation (S r R -> S r' R): "The S is to the r' of the R." and its converse "The R is to the r of
  the S." (edited), "The S is to the r of the R." and "The R is to the r' of the S." (original).

The four are shuffled by a generator seeded from (seed, pair id); the item depends only on the pair
record and the seed, so a resumed build remakes it byte-identical.
"""
from __future__ import annotations

from typing import Any

from mmfaith.builders.scene_view import seeded_rng
from mmfaith.images import sha256_bytes
from mmfaith.nouns import display_name, plural, with_article

QUESTION = "Which of the following statements are true of this image?"
LABELS = ("A", "B", "C", "D")
OTHER_SIDE = {"left": "right", "right": "left"}


def _things(count: int, noun: str) -> str:
    return f"{count} {noun if count == 1 else plural(noun)}"


def _name(facts: dict[str, Any], key: str) -> str:
    return display_name(facts[key])


def _exactly(count: int, noun: str) -> str:
    return f"There {'is' if count == 1 else 'are'} exactly {_things(count, noun)}."


def statements(template: str, facts: dict[str, Any], facts_edited: dict[str, Any],
               option_texts: list[str]) -> tuple[list[tuple[str, bool, bool]], str, str]:
    """([(statement, true of the edited image, true of the original)] x 4, cue before, cue after)."""
    if template == "color":
        noun, before, after = _name(facts, "category"), facts["color"], facts_edited["color"]
        others = [text for text in option_texts if text not in (before, after)][:2]
        rows = [(f"The {noun} is {after}.", True, False), (f"The {noun} is {before}.", False, True)]
        rows += [(f"The {noun} is {color}.", False, False) for color in others]
        return rows, f"the {noun} is {before}", f"the {noun} is {after}"
    if template in ("count", "existence"):
        noun, before, after = _name(facts, "category"), facts["count"], facts_edited["count"]
        if template == "existence":
            rows = [(f"There is {with_article(noun)}.", after > 0, before > 0),
                    (f"There is no {noun}.", after == 0, before == 0),
                    (f"There are two {plural(noun)}.", False, False),
                    (f"There are at least three {plural(noun)}.", False, False)]
        else:
            rows = [(_exactly(k, noun), k == after, k == before) for k in (after, before, max(before, after) + 1)]
            rows.append((f"There is at least one {noun}.", after >= 1, before >= 1))
        return rows, _things(before, noun) if before else f"no {noun}", _things(after, noun) if after else f"no {noun}"
    if template == "relation":
        subject, reference = _name(facts, "subject"), _name(facts, "reference")
        before, after = facts["relation"], facts_edited["relation"]
        rows = [(f"The {subject} is to the {after} of the {reference}.", True, False),
                (f"The {reference} is to the {before} of the {subject}.", True, False),
                (f"The {subject} is to the {before} of the {reference}.", False, True),
                (f"The {reference} is to the {after} of the {subject}.", False, True)]
        return (rows, f"the {subject} is to the {before} of the {reference}",
                f"the {subject} is to the {after} of the {reference}")
    raise ValueError(f"no perception statements for template {template!r}")


def perception_item(pair: dict[str, Any], seed: int) -> dict[str, Any] | None:
    """The perception item of one offline pair record (module docstring); None when the template gives
    fewer than four statements (a colour question with too few distractors)."""
    build = pair["build"]
    rows, cue_before, cue_after = statements(build["template"], build["facts"], build["facts_edited"],
                                             [option["text"] for option in pair["options"]])
    if len(rows) != len(LABELS):
        return None
    order = seeded_rng(seed, "perception", pair["id"]).permutation(len(rows))
    shuffled = [rows[int(i)] for i in order]
    options = [{"label": label, "text": text} for label, (text, _, _) in zip(LABELS, shuffled)]
    return {
        "id": "vfp-" + sha256_bytes(f"perception:{pair['id']}".encode("utf-8"))[:16],
        "pair_id": pair["id"],
        "image": pair["image_edited"],
        "image_sha256": pair["image_edited_sha256"],
        "question": QUESTION,
        "options": options,
        "answers": [label for label, (_, edited, _) in zip(LABELS, shuffled) if edited],
        "answers_original": [label for label, (_, _, original) in zip(LABELS, shuffled) if original],
        "cue_before": cue_before,
        "cue_after": cue_after,
        "source": pair["source"],
        "verification": {"status": "pending", "annotators": [], "reasons": [], "notes": None, "task_id": None,
                         "time": None, "history": []},
        "build": {"mmfaith_version": build["mmfaith_version"], "seed": build["seed"], "template": build["template"],
                  "statements_version": "vfaith-perception/1"},
    }


def attach_perception(pair: dict[str, Any], item: dict[str, Any] | None) -> None:
    """Record the pair's perception item's options and answers in `pair["build"]["perception"]`: what the
    annotators confirm or correct with the pair (annotation/vfaith), and what a pull carries back to
    perception.jsonl (`apply_pair_verification`)."""
    if item is not None:
        pair["build"]["perception"] = {"options": item["options"], "answers": item["answers"]}


def apply_pair_verification(item: dict[str, Any], pair: dict[str, Any], now: str) -> dict[str, Any]:
    """The perception item after its pair was verified: the pair's status, and the answer set the
    annotators confirmed or corrected (`pair["build"]["perception"]["answers"]`, a change kept in the
    item's history). The same item when nothing changed."""
    verification = dict(item["verification"])
    answers = ((pair["build"].get("perception") or {}).get("answers")) or item["answers"]
    status = pair["verification"]["status"]
    if answers == item["answers"] and status == verification["status"]:
        return item
    history = list(verification.get("history", []))
    if answers != item["answers"]:
        history.append({"field": "answers", "previous": item["answers"], "value": answers, "time": now,
                        "task_id": pair["verification"].get("task_id"),
                        "annotators": pair["verification"].get("annotators", [])})
    verification.update(status=status, annotators=pair["verification"].get("annotators", []),
                        task_id=pair["verification"].get("task_id"), time=pair["verification"].get("time"),
                        history=history)
    return {**item, "answers": answers, "verification": verification}
