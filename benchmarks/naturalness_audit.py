"""The naturalness audit: how many of the items the builders accept a careful annotator rejects (issue 29).

For every family (`--families`, default all four) the family's `AuditPart` (`FamilyParts.audit`,
builders/audit_set.py) names fixed recipes: `mmfaith build FAMILY` arguments with a seed, on the
embedded sample or, when `--coco DIR` gives the 128-image sample, on it. Each recipe is built (in
this process, or `--jobs N` at once in child processes, into `--work DIR/FAMILY/RECIPE`; a build is
reused while its recipe, the COCO folder and the builders' code are unchanged), its accepted items
are matched by key to the person's verdicts in benchmarks/audit/FAMILY.jsonl, and it prints, per
family and kind (edit type, template or mask style):

- accepted (distinct items the builders accept now), labelled (those with a verdict), rejected
  (labelled "reject"), the reject share (rejected / labelled) and, per family, the yield (accepted
  items of every recipe / the candidates the builds considered);
- for every labelled reject, its reason and note and each gate's reading (value, limit, margin:
  how far inside its limit the value lay), then per gate the median margin of the rejects and of
  the accepts (a gate that separates them has the smaller margin on the rejects);
- removed: labelled items the builders no longer make (their recipe was built; a coco128 recipe
  skipped for want of `--coco` removes nothing); unlabelled: accepted items without a verdict,
  listed for labelling, with `--cards DIR` one PNG review card each (DIR/KEY.png: the item's images
  side by side at a size a person can judge, its caption over each, its lines under them) and
  DIR/unlabelled.jsonl (key, kind, recipe, card) to fill in as verdicts.

The LAST line is the overall reject share of what the builders accept (rejected / labelled over
every family) with the per-family shares. `--write-rates` stores each labelled family's figures,
with the date and the builder version, in the package (mmfaith/data/audit_rates.json), which
every release card quotes ("before human verification, about N % of items are rejected by a
careful annotator"). How verdicts are given: docs/audit.md.

    python benchmarks/naturalness_audit.py                                   # every family, embedded sample
    python benchmarks/naturalness_audit.py --families spd-faith --cards /tmp/cards --work /tmp/audit
    python benchmarks/naturalness_audit.py --coco DIR --work /tmp/audit --write-rates
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import hashlib
import importlib.util
import io
import json
import multiprocessing
import re
import shutil
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from mmfaith import __version__
from mmfaith.builders.audit_set import AuditItem, AuditPart, AuditRecipe, Verdict, read_verdicts
from mmfaith.builders.preview_sheet import thumbnail
from mmfaith.errors import MmfaithError
from mmfaith.families import get
from mmfaith.jsonl import write_atomic, write_text_atomic
from mmfaith.suite import run_build

REPOSITORY = Path(__file__).resolve().parents[1]
VERDICTS = REPOSITORY / "benchmarks" / "audit"
FAMILIES = ("spd-faith", "vfaith", "crm", "mcot")
CARD_WIDTH = 560          # each image of a card, in pixels (COCO images are 640 wide: nearly full size)
CARD_FONT = 16
CARD_PADDING = 10


@dataclass
class Tally:
    """Counts of one kind (or of a whole family): distinct accepted items, those labelled, those rejected."""

    accepted: int = 0
    labelled: int = 0
    rejected: int = 0

    def share(self) -> float | None:
        """rejected / labelled, None when nothing is labelled."""
        return self.rejected / self.labelled if self.labelled else None


@dataclass
class FamilyAudit:
    """One family's measurement: its accepted items (first recipe that made each key), their verdicts, the
    yield's numerator and denominator, the labelled items no longer made, the recipes built and skipped."""

    family: str
    items: dict[str, tuple[str, AuditItem]]
    verdicts: dict[str, Verdict]
    made: int
    candidates: int
    removed: list[Verdict]
    built: list[str]
    skipped: list[str] = field(default_factory=list)

    def tallies(self) -> dict[str, Tally]:
        """Per kind of the accepted items, and "all"."""
        tallies: dict[str, Tally] = defaultdict(Tally)
        for key, (_, item) in self.items.items():
            for name in (item.kind, "all"):
                tally = tallies[name]
                tally.accepted += 1
                if key in self.verdicts:
                    tally.labelled += 1
                    tally.rejected += self.verdicts[key].verdict == "reject"
        return dict(tallies)

    def unlabelled(self) -> list[tuple[str, AuditItem]]:
        """(recipe, item) of the accepted items without a verdict, by key."""
        return [self.items[key] for key in sorted(self.items) if key not in self.verdicts]

    def yield_share(self) -> float | None:
        """Items accepted over all recipes / candidates considered (None when no candidate was counted)."""
        return self.made / self.candidates if self.candidates else None


def measure(family: str, part: AuditPart, builds: Iterable[tuple[AuditRecipe, Path]],
            verdicts: dict[str, Verdict], skipped: Iterable[str] = ()) -> FamilyAudit:
    """Match the accepted items of `builds` ((recipe, build dir), in recipe order) to `verdicts`.

    An item made by two recipes counts once (under the first) among the accepted, and once per recipe in the
    yield's numerator (each recipe's candidates are in its denominator). A verdict whose key no build made
    counts as removed unless its recipe is among `skipped` (not built this time)."""
    items: dict[str, tuple[str, AuditItem]] = {}
    made = candidates = 0
    built = []
    for recipe, build_dir in builds:
        built.append(recipe.name)
        for item in part.items(build_dir):
            made += 1
            items.setdefault(item.key, (recipe.name, item))
        candidates += part.candidates(build_dir)
    skipped = sorted(skipped)
    removed = [verdict for key, verdict in sorted(verdicts.items()) if key not in items and verdict.recipe not in skipped]
    return FamilyAudit(family, items, {key: v for key, v in verdicts.items() if key in items}, made, candidates,
                       removed, built, skipped)


def percent(share: float | None) -> str:
    """A share as "12.3 %", or "n/a" for None."""
    return "n/a" if share is None else f"{100 * share:.1f} %"


def report_lines(audit: FamilyAudit, cards: dict[str, Path] | None = None) -> list[str]:
    """The printed report of one family (module docstring); `cards` maps an unlabelled key to its card."""
    skipped = f"; skipped (no --coco): {', '.join(audit.skipped)}" if audit.skipped else ""
    lines = [f"{audit.family}: recipes built: {', '.join(audit.built) or 'none'}{skipped}",
             f"  {'kind':<24} {'accepted':>8} {'labelled':>8} {'rejected':>8} {'reject share':>12}"]
    tallies = audit.tallies()
    for kind in [*sorted(k for k in tallies if k != "all"), "all"]:
        if kind not in tallies:
            continue
        t = tallies[kind]
        lines.append(f"  {kind:<24} {t.accepted:>8} {t.labelled:>8} {t.rejected:>8} {percent(t.share()):>12}")
    lines.append(f"  yield: {audit.made} accepted of {audit.candidates} candidates = {percent(audit.yield_share())}")
    removed_rejects = sum(v.verdict == "reject" for v in audit.removed)
    lines.append(f"  removed (labelled, no longer made): {len(audit.removed)} ({removed_rejects} of them rejects)")
    rejects = [(key, recipe_item) for key, recipe_item in sorted(audit.items.items())
               if key in audit.verdicts and audit.verdicts[key].verdict == "reject"]
    if rejects:
        lines.append("  labelled rejects (gate: value, limit, margin):")
    for key, (_, item) in rejects:
        verdict = audit.verdicts[key]
        lines.append(f"    {key} [{item.kind}] {verdict.reason}: {verdict.note}")
        lines.extend(f"      {g.gate}: {g.value:.4g} ({g.passes} {g.limit:.4g}), margin {g.margin():.4g}" for g in item.gates)
    lines.extend(gate_summary(audit))
    unlabelled = audit.unlabelled()
    lines.append(f"  unlabelled: {len(unlabelled)}" + (" (to label):" if unlabelled else ""))
    for recipe, item in unlabelled:
        card = f" card {cards[item.key]}" if cards and item.key in cards else ""
        lines.append(f"    {item.key} [{item.kind}] recipe {recipe}{card}")
    return lines


def gate_summary(audit: FamilyAudit) -> list[str]:
    """Per gate, the median margin of the labelled rejects and of the labelled accepts."""
    margins: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"reject": [], "accept": []})
    for key, (_, item) in audit.items.items():
        if key in audit.verdicts:
            for reading in item.gates:
                margins[reading.gate][audit.verdicts[key].verdict].append(reading.margin())
    lines = []
    for gate in sorted(margins):
        parts = [f"{verdict}s median {statistics.median(values):.4g} (n {len(values)})" if values else f"{verdict}s none"
                 for verdict, values in margins[gate].items()]
        lines.append(f"  gate {gate} margin: {', '.join(parts)}")
    return lines


def last_line(audits: list[FamilyAudit]) -> str:
    """The overall reject share of the accepted items over every family, then each family's."""
    total = Tally()
    for audit in audits:
        t = audit.tallies().get("all", Tally())
        total.labelled += t.labelled
        total.rejected += t.rejected
    each = ", ".join(f"{a.family} {percent(a.tallies().get('all', Tally()).share())}" for a in audits)
    return (f"overall reject share of accepted items: {percent(total.share())} "
            f"({total.rejected} of {total.labelled} labelled); {each}")


def builders_fingerprint() -> str:
    """sha256 over the builders' Python sources (path and bytes) and the mmfaith version: a build is reused
    only while this is unchanged."""
    spec = importlib.util.find_spec("mmfaith.builders")
    root = Path(spec.origin).parent if spec and spec.origin else REPOSITORY / "builders"
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def coco_flags(coco: Path) -> list[str]:
    """The build's source flags for a COCO folder (annotations/instances_train2017.json, train2017/)."""
    annotations = coco / "annotations" / "instances_train2017.json"
    if not annotations.is_file():
        raise MmfaithError(f"{coco}: no annotations/instances_train2017.json (--coco takes a COCO folder)")
    return ["--coco-annotations", str(annotations), "--images", str(coco / "train2017")]


def build(family: str, recipe: AuditRecipe, coco: Path | None, work: Path, fingerprint: str) -> Path:
    """WORK/FAMILY/RECIPE built from `recipe` (reused when its stamp, RECIPE.stamp.json, says the same recipe,
    COCO folder and builders made it); the build's own output goes to RECIPE.log. A build stopped halfway
    (RECIPE.pending.json, written before it starts, says the same) is resumed, as `mmfaith build` resumes;
    any other folder there is made afresh."""
    out = work / family / recipe.name
    flags = coco_flags(coco) if recipe.source == "coco128" and coco is not None else []
    stamp = json.dumps({"family": family, "source": recipe.source, "args": list(recipe.args), "flags": flags,
                        "builders_sha256": fingerprint}, indent=1) + "\n"
    stamp_path, pending = out.with_name(recipe.name + ".stamp.json"), out.with_name(recipe.name + ".pending.json")
    if (out / "build.json").is_file() and stamp_path.is_file() and stamp_path.read_text(encoding="utf-8") == stamp:
        return out
    if not (pending.is_file() and pending.read_text(encoding="utf-8") == stamp):
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        pending.write_text(stamp, encoding="utf-8")
    stamp_path.unlink(missing_ok=True)
    with open(out.with_name(recipe.name + ".log"), "a", encoding="utf-8") as log, \
            contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        run_build(family, [*recipe.args, *flags], out, progress=False)
    pending.replace(stamp_path)
    return out


def card_name(key: str) -> str:
    """A file name for an item's card: the key with anything but letters, digits, '-', '_' and '.' as '_',
    and a short hash of the key (two keys that differ only in such characters get two cards)."""
    return re.sub(r"[^\w.-]", "_", key)[:120] + "-" + hashlib.sha256(key.encode()).hexdigest()[:8] + ".png"


def wrap(text: str, font: ImageFont.ImageFont, width: int, draw: ImageDraw.ImageDraw) -> list[str]:
    """`text` broken at spaces into lines no wider than `width` pixels (a longer word stays whole)."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if line and draw.textlength(candidate, font=font) > width:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return lines


def write_card(item: AuditItem, recipe: str, path: Path) -> Path:
    """One review card: the key, kind and recipe, then the item's images side by side (CARD_WIDTH wide each,
    caption above each), then its lines, wrapped; written as PNG at `path`."""
    font = ImageFont.load_default(size=CARD_FONT)
    step = CARD_FONT + 4
    thumbs = [(caption, thumbnail(image_path, CARD_WIDTH)[0]) for caption, image_path in item.images]
    width = max(CARD_WIDTH, len(thumbs) * (CARD_WIDTH + CARD_PADDING) - CARD_PADDING) + 2 * CARD_PADDING
    measure_draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    header = wrap(f"{item.key}  [{item.kind}]  recipe {recipe}", font, width - 2 * CARD_PADDING, measure_draw)
    text = [line for given in item.lines for line in wrap(given, font, width - 2 * CARD_PADDING, measure_draw)]
    image_height = max((t.height for _, t in thumbs), default=0)
    top = CARD_PADDING + len(header) * step + CARD_PADDING
    height = top + step + image_height + CARD_PADDING + len(text) * step + CARD_PADDING
    card = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(card)
    for row, line in enumerate(header):
        draw.text((CARD_PADDING, CARD_PADDING + row * step), line, fill=(90, 90, 90), font=font)
    for column, (caption, thumb) in enumerate(thumbs):
        x = CARD_PADDING + column * (CARD_WIDTH + CARD_PADDING)
        draw.text((x, top), caption, fill=(0, 0, 0), font=font)
        card.paste(thumb, (x, top + step))
    y = top + step + image_height + CARD_PADDING
    for row, line in enumerate(text):
        draw.text((CARD_PADDING, y + row * step), line, fill=(0, 0, 0), font=font)
    buffer = io.BytesIO()
    card.save(buffer, format="PNG")
    write_atomic(path, buffer.getvalue())
    return path


def write_cards(audit: FamilyAudit, folder: Path) -> dict[str, Path]:
    """A card per unlabelled item in FOLDER/FAMILY/, and FOLDER/FAMILY/unlabelled.jsonl listing them
    (key, kind, recipe, card); returns key -> card."""
    out = folder / audit.family
    out.mkdir(parents=True, exist_ok=True)
    cards: dict[str, Path] = {}
    listing = []
    for recipe, item in audit.unlabelled():
        cards[item.key] = write_card(item, recipe, out / card_name(item.key))
        listing.append(json.dumps({"key": item.key, "kind": item.kind, "recipe": recipe,
                                   "card": str(cards[item.key])}, sort_keys=True))
    write_text_atomic(out / "unlabelled.jsonl", "".join(line + "\n" for line in listing))
    return cards


def rates_entry(audit: FamilyAudit, fingerprint: str, today: str) -> dict[str, Any]:
    """What audit_rates.json keeps of a family's measurement."""
    t = audit.tallies()["all"]
    return {"reject_share": round(t.share(), 4), "rejected": t.rejected, "labelled": t.labelled,
            "accepted": t.accepted, "unlabelled": t.accepted - t.labelled, "removed": len(audit.removed),
            "yield": None if audit.yield_share() is None else round(audit.yield_share(), 4),
            "candidates": audit.candidates, "recipes": audit.built, "date": today,
            "builder_version": __version__, "builders_sha256": fingerprint}


def write_rates(path: Path, audits: list[FamilyAudit], fingerprint: str, today: str) -> list[str]:
    """Store in `path` (merged with the families it holds already) the figures of every audited family with at
    least one labelled item; returns the families written."""
    document = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    families = document.get("families", {})
    written = []
    for audit in audits:
        if audit.tallies().get("all", Tally()).labelled:
            families[audit.family] = rates_entry(audit, fingerprint, today)
            written.append(audit.family)
    document = {"format": "mmfaith-audit-rates/1",
                "about": "share of gate-accepted items a careful annotator rejects (benchmarks/naturalness_audit.py, "
                         "docs/audit.md)",
                "families": dict(sorted(families.items()))}
    write_text_atomic(path, json.dumps(document, indent=2, sort_keys=True) + "\n")
    return written


def rates_path() -> Path:
    """The package's audit_rates.json (beside the embedded sample, in mmfaith/data)."""
    spec = importlib.util.find_spec("mmfaith.data")
    return Path(spec.origin).parent / "audit_rates.json" if spec and spec.origin else REPOSITORY / "mmfaith/data/audit_rates.json"


def audit_family(family: str, coco: Path | None, work: Path, verdicts_dir: Path, fingerprint: str,
                 jobs: int = 1) -> FamilyAudit:
    """Build the family's recipes (coco128 ones only with `coco`; `jobs` of them at once, each in its own
    process) and measure them against its verdicts."""
    part: AuditPart = get(family).part("audit", "naturalness audit part")()
    recipes = [recipe for recipe in part.recipes if recipe.source != "coco128" or coco is not None]
    skipped = [recipe.name for recipe in part.recipes if recipe not in recipes]
    arguments = [(family, recipe, coco, work, fingerprint) for recipe in recipes]
    if jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            folders = list(pool.map(build, *zip(*arguments)))
    else:
        folders = [build(*argument) for argument in arguments]
    return measure(family, part, list(zip(recipes, folders)), read_verdicts(verdicts_dir / f"{family}.jsonl"), skipped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated (default: all four)")
    parser.add_argument("--coco", type=Path, metavar="DIR", help="the 128-image COCO sample: also build its recipes")
    parser.add_argument("--work", type=Path, metavar="DIR",
                        help="keep the builds here and reuse those of unchanged recipes (default: a temporary folder)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="build N recipes at once, each in its own process (default 1)")
    parser.add_argument("--cards", type=Path, metavar="DIR", help="write a review card per unlabelled item here")
    parser.add_argument("--verdicts", type=Path, default=VERDICTS, metavar="DIR", help="the verdict files FAMILY.jsonl")
    parser.add_argument("--write-rates", nargs="?", type=Path, const=rates_path(), metavar="FILE",
                        help="store the measured reject shares (default file: the package's audit_rates.json)")
    args = parser.parse_args(argv)
    families = [name.strip() for name in args.families.split(",") if name.strip()]
    fingerprint = builders_fingerprint()
    try:
        with contextlib.ExitStack() as stack:
            work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="audit-")))
            audits = []
            for family in families:
                audit = audit_family(family, args.coco, work, args.verdicts, fingerprint, args.jobs)
                cards = write_cards(audit, args.cards) if args.cards else None
                print("\n".join(report_lines(audit, cards)), flush=True)
                audits.append(audit)
        if args.write_rates:
            today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
            written = write_rates(args.write_rates, audits, fingerprint, today)
            print(f"rates of {', '.join(written) or 'no family'} written to {args.write_rates}")
    except MmfaithError as error:
        print(f"naturalness_audit: error: {error}", file=sys.stderr)
        return 2
    print(last_line(audits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
