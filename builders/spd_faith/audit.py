"""SPD-Faith's part of the naturalness audit (builders/audit_set.py, docs/audit.md).

Recipes: builds of the embedded sample and, with the 128-image sample, of that too, with fixed seeds
(every edit type: colour, removal, move, in single and multi pairs; the rule planner, the default
inpainter): mixed builds, builds of one edit type each, and multi-only builds, several seeds each (a
seed changes which objects, colours and places are drawn; an item made by two recipes counts once). Control pairs show the original twice and carry nothing to judge: they are
not audited (the recipes make none).

An item is a pair: key `DATASET/IMAGE_ID/SUBSET/edit;edit...` with each edit as `TYPE:ANN_ID` plus
its new colour or offset (what the pair is made of, as its id is), and for a pair with a recolour
`@` and the first RENDER_HASH hex digits of its edited image's sha256: a verdict on a recolour judges
how it was rendered, so a changed rendering is a new item to look at, not an old verdict; kind
`single/TYPE` or `multi`.
Its gates: the smallest visibility (mean delta E, above the build's minimum); over its removals and
moves the smallest fill-texture ratio and fill-surround uniformity and the largest fill blotch, over
its moves the largest ground difference (builders/gates.py; each absent when not judged or when the
build predates it); the smallest
colour share of the recoloured objects (above colors.MIN_DOMINANT_SHARE).
The review card shows the original with every edit outlined, the edited image untouched, and a
zoom of each edited region before and after (written once into BUILD/audit/).

Candidates (the yield's denominator): the pairs made and gated, accepted or rejected at the gate
stage; plan failures (no target fits) and duplicates were never pairs.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from mmfaith.builders.audit_set import AuditItem, AuditPart, AuditRecipe, GateReading
from mmfaith.builders.colors import MIN_DOMINANT_SHARE
from mmfaith.builders.gates import RECORDED_FILL_GATES
from mmfaith.builders.preview_sheet import outline
from mmfaith.builders.spd_faith.preview import TYPE_COLORS
from mmfaith.jsonl import read_jsonl

ZOOM_SIDE = 280        # each zoomed crop, in pixels (the longer side)
ZOOM_MARGIN = 0.5      # the crop is the box grown by this share of its size on every side
RENDER_HASH = 10       # hex digits of the edited image's sha256 in a recolour pair's key

def _series(prefix: str, source: str, args: tuple[str, ...], seeds: range) -> tuple[AuditRecipe, ...]:
    """One recipe a seed: `PREFIX-sSEED`, `args` and `--seed SEED`."""
    return tuple(AuditRecipe(f"{prefix}-s{seed}", source, (*args, "--seed", str(seed))) for seed in seeds)


MIXED = ("--per-tier", "4", "--multi", "4")
MULTI = ("--multi", "8")
ONLY = {kind: ("--per-tier", "4", "--edit-types", kind) for kind in ("color", "remove", "position")}
NODERIVS = ("--allow-noderivs",)  # audited, never released: an edited NoDerivs photo may not be distributed
RECIPES = (
    *_series("embedded", "embedded", MIXED, range(1, 4)),
    *_series("embedded-remove", "embedded", ONLY["remove"], range(4, 5)),
    *_series("embedded-position", "embedded", ("--per-tier", "3", "--edit-types", "position"), range(5, 6)),
    *_series("embedded-color", "embedded", ONLY["color"], range(6, 12)),
    *_series("embedded-remove", "embedded", ONLY["remove"], range(12, 15)),
    *_series("embedded-position", "embedded", ONLY["position"], range(15, 18)),
    *_series("embedded-multi", "embedded", MULTI, range(18, 22)),
    *_series("coco128", "coco128", MIXED, range(1, 2)),
    *_series("coco128-remove", "coco128", ONLY["remove"], range(2, 3)),
    *_series("coco128", "coco128", MIXED, range(3, 7)),
    *_series("coco128-color", "coco128", ONLY["color"], range(7, 12)),
    *_series("coco128-remove", "coco128", ONLY["remove"], range(12, 15)),
    *_series("coco128-position", "coco128", ONLY["position"], range(15, 18)),
    *_series("coco128-multi", "coco128", MULTI, range(18, 22)),
    *_series("coco128-nd", "coco128", (*MIXED, *NODERIVS), range(22, 24)),
    *_series("coco128-nd-color", "coco128", (*ONLY["color"], *NODERIVS), range(24, 30)),
    *_series("coco128-nd-remove", "coco128", (*ONLY["remove"], *NODERIVS), range(30, 33)),
    *_series("coco128-nd-position", "coco128", (*ONLY["position"], *NODERIVS), range(33, 36)),
    *_series("coco128-nd-multi", "coco128", (*MULTI, *NODERIVS), range(36, 40)),
)


def edit_key(edit: dict[str, Any]) -> str:
    """One planned edit as `TYPE:ANN_ID`, with `:COLOUR` for a recolour and `:DX,DY` for a move."""
    extra = edit["color_after"] if edit["type"] == "color" else (
        ",".join(str(v) for v in edit["offset"]) if edit["type"] == "position" else None)
    return f"{edit['type']}:{edit['ann_id']}" + (f":{extra}" if extra else "")


def item_key(record: dict[str, Any]) -> str:
    """The pair by what it is made of (module docstring)."""
    source = record["source"]
    plan = record["build"]["plan"]
    edits = ";".join(edit_key(edit) for edit in plan)
    rendered = f"@{record['image_b_sha256'][:RENDER_HASH]}" if any(edit["type"] == "color" for edit in plan) else ""
    return f"{source['dataset']}/{source['image_id']}/{record['subset']}/{edits}{rendered}"


def kind(record: dict[str, Any]) -> str:
    """`single/TYPE` for a one-edit pair, `multi` otherwise."""
    return f"single/{record['differences'][0]['type']}" if record["subset"] == "single" else "multi"


def gate_readings(gates: dict[str, Any]) -> tuple[GateReading, ...]:
    """The readings closest to their limits over the pair's edits (module docstring)."""
    readings = [GateReading("delta_e", min(gates["delta_e"]), gates["min_delta_e"], "above")]
    for gate, limit, passes in RECORDED_FILL_GATES:
        values = [value for value in gates.get(gate) or [] if value is not None]
        if values:
            closest = min(values) if passes == "above" else max(values)
            readings.append(GateReading(gate, closest, gates[limit], passes))
    shares = [value for value in gates.get("color_share") or [] if value is not None]
    if shares:
        readings.append(GateReading("color_share", min(shares), MIN_DOMINANT_SHARE, "above"))
    return tuple(readings)


def _boxes(record: dict[str, Any]) -> list[tuple[list[float], tuple[int, int, int]]]:
    return [(diff["bbox_before"], TYPE_COLORS[diff["type"]]) for diff in record["differences"]] + \
        [(diff["bbox_after"], TYPE_COLORS[diff["type"]]) for diff in record["differences"]
         if diff["bbox_after"] is not None and diff["bbox_after"] != diff["bbox_before"]]


def _outlined(build_dir: Path, record: dict[str, Any], path: Path) -> Path:
    """The original with every edit's boxes (before, and after for a move) outlined, at `path`."""
    with Image.open(build_dir / record["image_a"]) as image:
        outlined = image.convert("RGB")
    draw = ImageDraw.Draw(outlined)
    for bbox, color in _boxes(record):
        outline(draw, bbox, 1.0, color)
    outlined.save(path)
    return path


def _zooms(build_dir: Path, record: dict[str, Any], path: Path) -> Path:
    """Every edited box (grown by ZOOM_MARGIN) cut from the original and the edited image, scaled to
    ZOOM_SIDE, before | after in a row per box, at `path`."""
    with Image.open(build_dir / record["image_a"]) as a, Image.open(build_dir / record["image_b"]) as b:
        before, after = a.convert("RGB"), b.convert("RGB")
    rows = []
    for bbox, _ in _boxes(record):
        x, y, w, h = bbox
        grow = ZOOM_MARGIN * max(w, h)
        box = (max(0, int(x - grow)), max(0, int(y - grow)), min(before.width, int(x + w + grow) + 1),
               min(before.height, int(y + h + grow) + 1))
        scale = ZOOM_SIDE / max(box[2] - box[0], box[3] - box[1])
        size = (max(1, round((box[2] - box[0]) * scale)), max(1, round((box[3] - box[1]) * scale)))
        rows.append([image.crop(box).resize(size, Image.Resampling.LANCZOS) for image in (before, after)])
    width = max(sum(crop.width for crop in row) + 8 for row in rows)
    sheet = Image.new("RGB", (width, sum(row[0].height for row in rows) + 8 * len(rows)), "white")
    y = 0
    for left, right in rows:
        sheet.paste(left, (0, y))
        sheet.paste(right, (left.width + 8, y))
        y += left.height + 8
    sheet.save(path)
    return path


def _card_images(build_dir: Path, record: dict[str, Any]) -> tuple[tuple[str, Path], ...]:
    folder = build_dir / "audit"
    folder.mkdir(exist_ok=True)
    outlined, zooms = folder / f"{record['id']}-outlined.png", folder / f"{record['id']}-zoom.png"
    if not outlined.is_file():
        _outlined(build_dir, record, outlined)
    if not zooms.is_file():
        _zooms(build_dir, record, zooms)
    return (("original, edits outlined", outlined), ("edited", build_dir / record["image_b"]),
            ("each edit: before | after", zooms))


def items(build_dir: Path) -> Iterator[AuditItem]:
    """The accepted pairs of a build (controls left out), as the audit sees them."""
    for _, record in read_jsonl(build_dir / "records.jsonl"):
        if record["subset"] == "control":
            continue
        lines = (f"{record['id']}  image {record['source']['image_id']}  {record['subset']} "
                 f"{record['difficulty'] or ''}",
                 *(f"- {diff['description']} (annotation {diff['source_ann_id']}, area {diff['area_ratio']:.3f})"
                   for diff in record["differences"]))
        yield AuditItem(item_key(record), kind(record), gate_readings(record["build"]["gates"]),
                        _card_images(build_dir, record), lines)


def candidates(build_dir: Path) -> int:
    """Pairs made and gated: the accepted non-control pairs and the rejections at the gate stage."""
    accepted = sum(record["subset"] != "control" for _, record in read_jsonl(build_dir / "records.jsonl"))
    rejected_path = build_dir / "rejected.jsonl"
    rejected = sum(rejection["stage"] == "gate" for _, rejection in read_jsonl(rejected_path)) \
        if rejected_path.is_file() else 0
    return accepted + rejected


def audit_part() -> AuditPart:
    """SPD-Faith's recipes, items and candidates (module docstring)."""
    return AuditPart(RECIPES, items, candidates)
