"""VFaith's part of the naturalness audit (builders/audit_set.py, docs/audit.md).

Recipes: offline builds of the embedded COCO sample (every template, three seeds: the seed draws the
questions tried per image, the recolour target and the instance removed) and three of the 128-image
sample (every template; the removal and relation templates alone, more questions tried per image, so
that the few removals the gates let through are seen; colour and relation with every question of each
image tried, so that every recolour and mirror the builders make is seen), one more of each sample with
every count and existence question of each image and no gold cap (`*-crops-s3`: every crop out of frame,
builders/vfaith/reframe.py, is seen), every colour and relation question of the embedded sample with two
more seeds (another seed draws other options, so another recolour target), and the 128-image sample's
NoDerivs images (`coco128-nd-*`, `--allow-noderivs`: audited, never released; docs/vfaith.md; a relation-only
build draws each relation's subject anew, so a mirror is asked the other way too). Every kept
pair is an `AuditItem`:

- `key`: the question's slot (template, image id, annotation ids), the gold on the photo and on the
  made image, and the first 12 hex digits of the made image's sha256. It does not depend on the
  presentation (options' letters, a reversed pair), so another seed that makes the same edit gives
  the same key; a change of the rendering gives a new key (the verdict was on the old pixels).
- `kind`: the template (color, count, existence, relation).
- `gates`: the pixel gates as the build recorded them (mean delta E over the cue above
  `min_delta_e`, none for a crop, whose kept share of the photo above `min_kept_share` is read
  instead; changed pixels outside the allowed region at most 0, a filled hole's texture ratio,
  surround uniformity and blotch within their limits), each that was judged.
- `images`: the photo, then the made image (the edited one, or the original of a reversed pair).
- `lines`: the question, the options, the gold on each image, the edit, the cue's box and the
  perception statements with the ones true of the made image marked, so the card shows every gold the
  item carries.

The yield's denominator is every question the build tried: its pairs and its rejected.jsonl lines.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmfaith.builders.audit_set import AuditItem, AuditPart, AuditRecipe, GateReading
from mmfaith.builders.gates import RECORDED_FILL_GATES
from mmfaith.builders.vfaith.presentation import PHOTO_SIDES, source_photo
from mmfaith.jsonl import read_jsonl

EVERY_TEMPLATE = ("--per-template", "20", "--per-image", "3")
CROPS = ("--templates", "count,existence", "--per-template", "60", "--per-image", "9", "--gold-margin", "1")
"""Every count and existence question of each image, no gold cap: every crop (builders/vfaith/reframe.py) is seen."""
COLOR_RELATION = ("--templates", "color,relation", "--per-template", "40", "--per-image", "9")
"""Every colour and relation question of each image: every recolour and mirror is seen; the seed draws a colour
question's options and its target among them, and which object of a relation is its subject."""
NODERIVS = "--allow-noderivs"
"""The 128-image sample's NoDerivs images too (about 40 of 128): audited, never released (docs/vfaith.md)."""
RECIPES: tuple[AuditRecipe, ...] = (
    AuditRecipe("embedded-s0", "embedded", (*EVERY_TEMPLATE, "--seed", "0")),
    AuditRecipe("embedded-s1", "embedded", (*EVERY_TEMPLATE, "--seed", "1")),
    AuditRecipe("embedded-s2", "embedded", (*EVERY_TEMPLATE, "--seed", "2")),
    AuditRecipe("coco128-s0", "coco128", ("--per-template", "25", "--per-image", "2", "--seed", "0")),
    AuditRecipe("coco128-edits-s1", "coco128", ("--templates", "count,existence,relation", "--per-template", "25",
                                                "--per-image", "4", "--seed", "1")),
    AuditRecipe("coco128-color-relation-s2", "coco128", (*COLOR_RELATION, "--seed", "2")),
    AuditRecipe("embedded-crops-s3", "embedded", (*CROPS, "--seed", "3")),
    AuditRecipe("coco128-crops-s3", "coco128", (*CROPS, "--seed", "3")),
    *(AuditRecipe(f"embedded-color-relation-s{seed}", "embedded", (*COLOR_RELATION, "--seed", str(seed)))
      for seed in (3, 4)),
    AuditRecipe("coco128-nd-crops-s3", "coco128", (*CROPS, NODERIVS, "--seed", "3")),
    *(AuditRecipe(f"coco128-nd-color-relation-s{seed}", "coco128", (*COLOR_RELATION, NODERIVS, "--seed", str(seed)))
      for seed in range(4, 10)),
    AuditRecipe("coco128-nd-relation-s10", "coco128", ("--templates", "relation", "--per-template", "40",
                                                       "--per-image", "9", NODERIVS, "--seed", "10")),
)


def audit_part() -> AuditPart:
    """VFaith's recipes, its kept pairs as audit items, and the questions its builds tried."""
    return AuditPart(recipes=RECIPES, items=audit_items, candidates=candidates)


def candidates(build_dir: Path) -> int:
    """The questions a build tried: its pairs and its rejections (every stage, the gold cap included)."""
    return sum(1 for _ in read_jsonl(build_dir / "records.jsonl")) + \
        sum(1 for _ in read_jsonl(build_dir / "rejected.jsonl"))


def audit_items(build_dir: Path) -> Iterator[AuditItem]:
    """Every pair of a build as an audit item (module docstring), in records.jsonl's order."""
    perception = {line["pair_id"]: line for _, line in read_jsonl(build_dir / "perception.jsonl")}
    for _, record in read_jsonl(build_dir / "records.jsonl"):
        yield _item(build_dir, record, perception.get(record["id"]))


def _item(build_dir: Path, record: dict[str, Any], perception: dict[str, Any] | None) -> AuditItem:
    photo = source_photo(record)
    made = next(side for side in PHOTO_SIDES if side != photo)
    options = {option["label"]: option["text"] for option in record["options"]}
    gold = {side: options[record[f"answer_{side.removeprefix('image_')}"]] for side in PHOTO_SIDES}
    build = record["build"]
    key = f"{build['slot']}:{gold[photo]}->{gold[made]}:{record[f'{made}_sha256'][:12]}"
    operation = record["edit"]["operation"]
    return AuditItem(key=key, kind=build["template"], gates=_gates(build["gates"]),
                     images=((f"photo (COCO {record['source']['image_id']})", build_dir / record[photo]),
                             (f"made by {operation}", build_dir / record[made])),
                     lines=_lines(record, options, gold[photo], gold[made], perception))


def _gates(gates: dict[str, Any]) -> tuple[GateReading, ...]:
    readings = [GateReading("outside_changed_pixels", float(gates["outside_changed_pixels"]),
                            float(gates["outside_tolerance"]), "below")]
    if gates["delta_e"] is not None:
        readings.insert(0, GateReading("delta_e", float(gates["delta_e"]), float(gates["min_delta_e"]), "above"))
    if gates.get("kept_share") is not None:
        readings.append(GateReading("kept_share", float(gates["kept_share"]), float(gates["min_kept_share"]), "above"))
    for gate, limit, passes in RECORDED_FILL_GATES:
        if gates.get(gate) is not None:
            readings.append(GateReading(gate, float(gates[gate]), float(gates[limit]), passes))
    return tuple(readings)


def _lines(record: dict[str, Any], options: dict[str, str], photo_gold: str, made_gold: str,
           perception: dict[str, Any] | None) -> tuple[str, ...]:
    cue = next((c for c in record["visual_cues"] if c["id"] == record["edit"]["cue_id"]), None)
    box = "" if cue is None else " at x,y,w,h " + ",".join(f"{v:.0f}" for v in cue["bbox"])
    lines = [f"Q: {record['question']}  ({'  '.join(f'{k}. {v}' for k, v in options.items())})",
             f"gold on the photo: {photo_gold}; gold on the made image: {made_gold}",
             f"edit: {record['edit']['instruction']}{box}"]
    if perception is not None:
        true = set(perception["answers"])
        seen = "photo" if source_photo(record) == "image_edited" else "made image"
        lines.append(f"statements true of the {seen}: " + "; ".join(
            f"[{'x' if o['label'] in true else ' '}] {o['text']}" for o in perception["options"]))
    return tuple(lines)
