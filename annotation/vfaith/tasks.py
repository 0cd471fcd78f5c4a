"""VFaith's side of the annotation round trip: the labeling config, record -> task, annotation -> Vote.

Contract with annotation/vfaith/labeling.xml (control names): `answer` (the option the annotator
finds correct for the edited image, as its choice text "B. blue"), `natural` (yes|no), `reasons`
(with natural = no: artifact, unnatural, ambiguous, other), `category` (RWS|REA|PFK|CRE|TIF,
optional) and `notes`. Anything else is a Misfit. The vote (the merge is the shared machinery's):
- an answer equal to `answer_original` rejects the pair, reason "answer unchanged" (the edit did not
  flip the answer);
- natural = no rejects it with the given reasons (at least one); the question is asked of the image the
  edit made (the edited one, or the original of a reversed pair: `build.source_photo`, task field `made`);
- otherwise it accepts; an answer other than the planned `answer_edited` replaces it (an edit of
  `answer_edited`, kept in the record's verification history), and so does a category other than
  the record's.
- `perception` (optional; the statements of the pair's perception item, "A. The car is blue."): the
  set the annotator finds true of the edited image; a set other than the planned one replaces
  `build.perception.answers` (an edit with history), and after the pull perception.jsonl follows:
  each item takes its pair's status and confirmed answer set (`after_pull`,
  builders/vfaith/perception.apply_pair_verification).
"""
from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from mmfaith.annotation.family import Family
from mmfaith.annotation.votes import Misfit, Vote

NAME = "vfaith"
IMAGE_FIELDS = {"image_original": "image_original_sha256", "image_edited": "image_edited_sha256"}
REASONS = ("artifact", "unnatural", "ambiguous", "other")
UNCHANGED = "answer unchanged"
CATEGORIES = ("RWS", "REA", "PFK", "CRE", "TIF")
KINDS = {"answer": "choices", "natural": "choices", "reasons": "choices", "category": "choices",
         "perception": "choices", "notes": "textarea"}
NO_PERCEPTION = "(this pair has no perception item)"
MADE = {"image_original": "edited",
        "image_edited": "ORIGINAL (this pair is reversed: the edited image is the source photo, the original was made "
                        "from it)"}
"""The image whose naturalness the annotator judges, by the record's `build.source_photo`: the one an edit made."""


def label_config() -> str:
    """The Label Studio labeling config (annotation/vfaith/labeling.xml, shipped as package data)."""
    return files("mmfaith.annotation.vfaith").joinpath("labeling.xml").read_text(encoding="utf-8")


def option_text(option: dict[str, Any]) -> str:
    """An option as the task shows it and the `answer` choice carries it: "B. blue"."""
    return f"{option['label']}. {option['text']}"


def task_data(record: dict[str, Any], url: Callable[[str], str], extra_files: dict[str, str]) -> dict[str, Any]:
    """The task's `data` for one pair: both images, the question, the options (the `answer` choices) and the
    build's gold as text (shown below the questions)."""
    options = {o["label"]: option_text(o) for o in record["options"]}
    perception = record["build"].get("perception")
    statements = {o["label"]: option_text(o) for o in perception["options"]} if perception else {}
    return {
        "made": MADE[record["build"].get("source_photo", "image_original")],
        "image_original": url(record["image_original"]),
        "image_edited": url(record["image_edited"]),
        "question": record["question"],
        "options": [{"value": text} for text in options.values()],
        "planned": (f"original answer {options.get(record['answer_original'], record['answer_original'])}; planned "
                    f"edited answer {options.get(record['answer_edited'], record['answer_edited'])}; edit: "
                    f"{record['edit']['instruction']}; category {record['category']}"
                    + (f"; perception: true of the edited image {', '.join(perception['answers'])}" if perception
                       else "")),
        "perception_options": [{"value": text} for text in statements.values()] or [{"value": NO_PERCEPTION}],
    }


def _choices(item: dict[str, Any], name: str, allowed: tuple[str, ...]) -> list[str]:
    chosen = item.get("value", {}).get("choices")
    if not isinstance(chosen, list) or not chosen or any(c not in allowed for c in chosen):
        raise Misfit(f"{name}: expected choices among {list(allowed)}, found {chosen!r}")
    return chosen


def _single(item: dict[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    chosen = _choices(item, name, allowed)
    if len(chosen) != 1:
        raise Misfit(f"{name}: expected one choice, found {chosen!r}")
    return chosen[0]


def read_vote(result: list[dict[str, Any]], record: dict[str, Any], annotation_id: int, annotator: str,
              time: str | None) -> Vote:
    """Turn an annotation's result into a Vote for `record` (module docstring); Misfit when it does not fit
    the config (unknown control, wrong type, a value outside the config, no answer or naturalness, reasons
    with natural = yes, natural = no without a reason)."""
    seen: dict[str, dict[str, Any]] = {}
    for item in result:
        name = item.get("from_name") if isinstance(item, dict) else None
        if name not in KINDS:
            raise Misfit(f"unknown control {name!r}")
        if item.get("type") != KINDS[name]:
            raise Misfit(f"{name}: expected type {KINDS[name]}, found {item.get('type')!r}")
        if name in seen:
            raise Misfit(f"{name}: given twice")
        seen[name] = item
    for required in ("answer", "natural"):
        if required not in seen:
            raise Misfit(f"no {required}")
    labels = {option_text(o): o["label"] for o in record["options"]}
    answer = labels[_single(seen["answer"], "answer", tuple(labels))]
    natural = _single(seen["natural"], "natural", ("yes", "no"))
    reasons = tuple(sorted(_choices(seen["reasons"], "reasons", REASONS))) if "reasons" in seen else ()
    if natural == "yes" and reasons:
        raise Misfit(f"natural yes with reasons {list(reasons)}")
    if natural == "no" and not reasons:
        raise Misfit("natural no without a reason")
    text = seen["notes"].get("value", {}).get("text") if "notes" in seen else None
    notes = text[0].strip() if isinstance(text, list) and text and isinstance(text[0], str) else None
    if answer == record["answer_original"]:
        reasons = tuple(sorted({*reasons, UNCHANGED}))
    if reasons:
        return Vote(annotation_id, annotator, "reject", reasons, notes or None, {}, time)
    edits: dict[str, Any] = {}
    if answer != record["answer_edited"]:
        edits["answer_edited"] = answer
    perception = record["build"].get("perception")
    if "perception" in seen and perception:
        statements = {option_text(o): o["label"] for o in perception["options"]}
        chosen = sorted(statements[text] for text in _choices(seen["perception"], "perception", tuple(statements)))
        if chosen != perception["answers"]:
            edits["build.perception.answers"] = chosen
    if "category" in seen and (category := _single(seen["category"], "category", CATEGORIES)) != record["category"]:
        edits["category"] = category
    return Vote(annotation_id, annotator, "accept", (), notes or None, edits, time)


def _perception_follows(build_dir: Path, pairs: list[dict[str, Any]], now: str) -> None:
    """Bring perception.jsonl up to date with the pulled pairs (module docstring); rewritten only on a change."""
    from mmfaith.builders.vfaith.perception import apply_pair_verification
    from mmfaith.jsonl import canonical_json, read_jsonl, write_atomic

    path = build_dir / "perception.jsonl"
    if not path.exists():
        return
    by_id = {pair["id"]: pair for pair in pairs}
    items = [item for _, item in read_jsonl(path)]
    updated = [apply_pair_verification(item, by_id[item["pair_id"]], now) if item["pair_id"] in by_id else item
               for item in items]
    if updated != items:
        write_atomic(path, "".join(canonical_json(item) + "\n" for item in updated).encode("utf-8"))


def family() -> Family:
    """VFaith as a Family for the generic push/pull machinery."""
    return Family(name=NAME, schema="vfaith_pair", label_config=label_config, image_fields=IMAGE_FIELDS,
                  task_data=task_data, read_vote=read_vote, after_pull=_perception_follows)
