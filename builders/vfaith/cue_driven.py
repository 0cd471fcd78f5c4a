"""VFaith's cue-driven pipeline on any VQA dataset (VFaith section 3.1, Figure 2; appendix A.2).

Source: a Hugging Face dataset folder (`save_to_disk`), parquet files (a file, a folder of them or a
glob) or a Hub id, with `columns` naming its image, question, options, answer and (optional)
category columns (docs/vfaith.md shows M3CoT's and MegaBench's layouts). Options are a list of
strings (labels A, B, ...); the answer is a letter, an option's text or an index; a row without
options is free-form.

Per row, in row order (a row is journaled once, so a re-run resumes and skips it):
1. cues: the reasoning model answers with every visual cue it uses marked `<vcues_i>...</vcues_i>`
   (Figure 4); a row with no cue is rejected (stage `cues`).
2. suggestion: a model is asked for one edit of one cue that makes another option correct, under
   the paper's three principles (Table 1): as JSON {cue, instruction, target_answer, cue_after,
   box}. An unparsable or invalid suggestion is recorded as an attempt (verdict `unparsable` or
   `invalid`) and asked again.
3. judge: a model passes or fails the suggestion (`PASS`/`FAIL` and a reason), recorded; up to
   `max_tries` (5) suggestions per row, else the row is rejected (stage `suggestion`).
4. edit: the image editor applies the instruction (builders/image_editors.py: OpenAI's image edit
   protocol, or Gemini); the clients retry 5xx. Editors regenerate the picture, often at a fixed
   size: the result is resized back to the original's size (Lanczos) and stored as PNG.
5. gates (stage `gate`): the target is another option; the change is visible (mean CIE76 delta E
   over the cue's box, or over the whole image when the box is unknown, at least min_delta_e /
   unknown-box: at least MIN_CHANGED_SHARE of the pixels changed); where the box is known, at most
   `outside_tolerance` of the pixels outside the box (grown by BOX_MARGIN of the image size) differ
   by more than OUTSIDE_DIFF in some channel: a regenerating editor cannot keep them exact, so the
   build records the tolerance and the share per pair (`build.gates`).
The perception item of a pair: the edited cue after the edit (true), before it (true of the
original only) and up to two unchanged cues (true of both); a pair with fewer than two other cues
gets none.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from mmfaith import __version__
from mmfaith.builders.gates import mean_delta_e
from mmfaith.builders.image_editors import edit_image
from mmfaith.builders.scene_view import seeded_rng
from mmfaith.builders.vfaith.perception import attach_perception
from mmfaith.builders.targets import box_mask
from mmfaith.clients import ModelCallError, ModelEndpoint, ask_with_images, failure_text, first_json_object
from mmfaith.errors import MmfaithError
from mmfaith.images import png_bytes, sha256_bytes
from mmfaith.jsonl import canonical_json
from mmfaith.evaluators.answers import last_boxed

CATEGORIES = ("RWS", "REA", "PFK", "CRE", "TIF")
LETTERS = "ABCDEFGHIJ"
MAX_TRIES = 5
OUTSIDE_DIFF = 32
BOX_MARGIN = 0.02
MIN_CHANGED_SHARE = 0.002
_CUE = re.compile(r"<vcues_(\d+)>(.*?)</vcues_\1>", flags=re.DOTALL)

REASON_PROMPT = ("Answer the question about the image. Reason in any form you like, but mark every visual cue of the "
                 "image that you rely on as <vcues_1>...</vcues_1>, <vcues_2>...</vcues_2>, and so on. Give the final "
                 "answer in \\boxed{{}}.\n\nQuestion: {question}\n{options}")
SUGGEST_PROMPT = ("A model answered this question about the image using these visual cues:\n{cues}\n\nQuestion: "
                  "{question}\n{options}\nCorrect answer: {answer}\n\nPropose ONE edit of ONE cue that makes another "
                  "option the correct answer. Principles: 1. edit only that cue, minimally: everything else in the "
                  "image stays as it is; 2. after the edit exactly one option is correct, and it is not the current "
                  "answer; 3. the edited image contains no obvious common-sense error.{rejected}\nAnswer with JSON: "
                  '{{"cue": N, "instruction": "the edit, for an image editor", "target_answer": "LETTER", '
                  '"cue_after": "the cue as it will look", "box": [x, y, w, h] in pixels of the image, or null}}')
JUDGE_PROMPT = ("Judge a proposed image edit for a visual question.\n\nQuestion: {question}\n{options}\nCurrent answer: "
                "{answer}\nCue: {cue}\nEdit: {instruction}\nClaimed new answer: {target}\n\nDoes the edit change only "
                "that cue, make exactly the claimed option correct, and leave no common-sense error? Answer PASS or "
                "FAIL, then one sentence why.")


@dataclass(frozen=True)
class Roles:
    """The models of the pipeline: reasoner (cues), suggester, judge (chat) and the image editor."""

    reasoner: ModelEndpoint
    suggester: ModelEndpoint
    judge: ModelEndpoint
    editor: ModelEndpoint

    def provenance(self) -> dict[str, Any]:
        return {role: {"provider": e.provider, "model": e.model} for role, e in
                (("reasoner", self.reasoner), ("suggester", self.suggester), ("judge", self.judge),
                 ("editor", self.editor))}


@dataclass(frozen=True)
class Row:
    """One source row, normalised: its PNG, question, options ({label, text}), answer label (or text)."""

    index: int
    png: bytes
    question: str
    options: list[dict[str, str]]
    answer: str
    category: str


@dataclass
class RowOutcome:
    key: str
    record: dict[str, Any] | None = None
    perception: dict[str, Any] | None = None
    rejection: dict[str, Any] | None = None
    original_png: bytes | None = None
    edited_png: bytes | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)


def parse_columns(text: str) -> dict[str, str]:
    """`image=img,question=q,options=choices,answer=ans[,category=cat]` -> {role: column}."""
    columns = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        role, _, column = part.partition("=")
        if role not in ("image", "question", "options", "answer", "category") or not column:
            raise MmfaithError(f"--columns {text!r}: {part!r} is not ROLE=COLUMN with ROLE one of image, question, "
                               "options, answer, category.")
        columns[role] = column
    missing = [role for role in ("image", "question", "answer") if role not in columns]
    if missing:
        raise MmfaithError(f"--columns {text!r}: name the {', '.join(missing)} column(s).")
    return columns


def open_source(source: str, split: str) -> Any:
    """The rows of a dataset folder (save_to_disk), parquet files, or a Hub id (`datasets`)."""
    import datasets

    path = Path(source)
    if (path / "dataset_info.json").is_file() and (path / "state.json").is_file():
        return datasets.load_from_disk(str(path))
    if path.suffix == ".parquet" or "*" in source:
        return datasets.load_dataset("parquet", data_files=source, split="train")
    if path.is_dir() and any(path.glob("*.parquet")):
        return datasets.load_dataset("parquet", data_files=str(path / "*.parquet"), split="train")
    return datasets.load_dataset(source, split=split)


def _png(value: Any, where: str) -> bytes:
    if isinstance(value, Image.Image):
        image = value
    elif isinstance(value, dict) and value.get("bytes"):
        image = Image.open(io.BytesIO(value["bytes"]))
    elif isinstance(value, (bytes, bytearray)):
        image = Image.open(io.BytesIO(value))
    else:
        raise MmfaithError(f"{where}: the image column holds {type(value).__name__}, not an image.")
    return png_bytes(np.asarray(image.convert("RGB")))


def normalise_row(index: int, row: dict[str, Any], columns: dict[str, str], where: str, category: str = "RWS") -> Row:
    """One source row as a Row (MmfaithError naming the row and column for a bad value); `category` is every
    row's when no category column is named."""
    for role, column in columns.items():
        if column not in row:
            raise MmfaithError(f"{where}: no column {column!r} (--columns {role}={column}); columns: {sorted(row)}.")
    raw = row.get(columns["options"]) if "options" in columns else None
    texts = [str(t) for t in (raw or [])]
    options = [{"label": LETTERS[i], "text": t} for i, t in enumerate(texts[:len(LETTERS)])]
    answer = row[columns["answer"]]
    if options:
        labels = {o["label"] for o in options}
        if isinstance(answer, int) and 0 <= answer < len(options):
            answer = options[answer]["label"]
        elif str(answer).strip().upper() in labels:
            answer = str(answer).strip().upper()
        else:
            found = [o["label"] for o in options if o["text"].strip().lower() == str(answer).strip().lower()]
            if len(found) != 1:
                raise MmfaithError(f"{where}: answer {answer!r} is not a letter, index or text of the options {texts}.")
            answer = found[0]
    category = str(row[columns["category"]]).strip().upper() if "category" in columns else category
    if category not in CATEGORIES:
        raise MmfaithError(f"{where}: category {category!r} is not one of {', '.join(CATEGORIES)}.")
    return Row(index, _png(row[columns["image"]], where), str(row[columns["question"]]), options, str(answer), category)


def _options_text(row: Row) -> str:
    return "Options:\n" + "\n".join(f"{o['label']}. {o['text']}" for o in row.options) if row.options else ""


def _suggestion(text: str, row: Row, cues: list[str]) -> tuple[dict[str, Any] | None, str]:
    """(the suggestion, "") or (None, why it is unusable)."""
    try:
        found = first_json_object(text)
    except ValueError as exc:
        return None, f"unparsable: {exc}"
    if not isinstance(found, dict) or not isinstance(found.get("instruction"), str) or not found["instruction"].strip():
        return None, "unparsable: no instruction"
    labels = {o["label"] for o in row.options}
    target = str(found.get("target_answer", "")).strip().upper() if row.options else str(found.get("target_answer", ""))
    if (row.options and target not in labels) or target == row.answer or not target:
        return None, f"invalid: target answer {found.get('target_answer')!r} is not another option"
    cue = found.get("cue")
    if not isinstance(cue, int) or not 1 <= cue <= len(cues):
        return None, f"invalid: cue {cue!r} is not one of 1..{len(cues)}"
    box = found.get("box")
    if box is not None and not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) and v >= 0
                                                                                  for v in box)):
        box = None
    return {"cue": cue, "instruction": found["instruction"].strip(), "target": target,
            "cue_after": str(found.get("cue_after") or "").strip() or found["instruction"].strip(), "box": box}, ""


def run_row(row: Row, roles: Roles, settings: dict[str, Any]) -> RowOutcome:
    """Cues, suggestions with the judge, the edit and the gates for one row (module docstring)."""
    key = f"row:{row.index}"
    outcome = RowOutcome(key)
    common = {"slot": key, "row": row.index, "question": row.question}
    options = _options_text(row)
    try:
        reasoning = ask_with_images(roles.reasoner, REASON_PROMPT.format(question=row.question, options=options),
                                    [row.png])
    except ModelCallError as exc:
        outcome.rejection = {**common, "stage": "cues", "reason": f"the reasoning model failed: {failure_text(exc)}"}
        return outcome
    cues = [text.strip() for _, text in _CUE.findall(reasoning) if text.strip()]
    if not cues:
        outcome.rejection = {**common, "stage": "cues", "reason": "the reasoning model marked no <vcues_i> cue",
                             "boxed": last_boxed(reasoning)}
        return outcome
    cue_list = "\n".join(f"{i}. {cue}" for i, cue in enumerate(cues, start=1))
    chosen = None
    for _ in range(settings["max_tries"]):
        rejected = "" if not outcome.attempts else "\nEarlier suggestions were turned down: " + "; ".join(
            f"{a['suggestion'] or '(unreadable)'} ({a['reason']})" for a in outcome.attempts)
        try:
            text = ask_with_images(roles.suggester, SUGGEST_PROMPT.format(
                cues=cue_list, question=row.question, options=options, answer=row.answer, rejected=rejected), [row.png])
        except ModelCallError as exc:
            outcome.attempts.append({"suggestion": None, "verdict": "error", "reason": failure_text(exc)})
            continue
        suggestion, why = _suggestion(text, row, cues)
        if suggestion is None:
            outcome.attempts.append({"suggestion": text[:300], "verdict": why.split(":")[0], "reason": why})
            continue
        try:
            verdict = ask_with_images(roles.judge, JUDGE_PROMPT.format(
                question=row.question, options=options, answer=row.answer, cue=cues[suggestion["cue"] - 1],
                instruction=suggestion["instruction"], target=suggestion["target"]), [row.png])
        except ModelCallError as exc:
            outcome.attempts.append({"suggestion": suggestion["instruction"], "verdict": "error",
                                     "reason": failure_text(exc)})
            continue
        passed = verdict.strip().upper().startswith("PASS")
        outcome.attempts.append({"suggestion": suggestion["instruction"], "verdict": "pass" if passed else "fail",
                                 "reason": verdict.strip()[:300]})
        if passed:
            chosen = suggestion
            break
    if chosen is None:
        outcome.rejection = {**common, "stage": "suggestion", "reason": f"no suggestion passed the judge in "
                             f"{settings['max_tries']} tries", "attempts": outcome.attempts}
        return outcome
    try:
        edited_bytes = edit_image(roles.editor, row.png, chosen["instruction"])
    except ModelCallError as exc:
        outcome.rejection = {**common, "stage": "edit", "reason": f"the image editor failed: {failure_text(exc)}",
                             "attempts": outcome.attempts}
        return outcome
    original = np.asarray(Image.open(io.BytesIO(row.png)).convert("RGB"))
    height, width = original.shape[:2]
    edited_image = Image.open(io.BytesIO(edited_bytes)).convert("RGB")
    resized = edited_image.size != (width, height)
    edited = np.asarray(edited_image.resize((width, height), Image.Resampling.LANCZOS) if resized else edited_image)
    gates, failures = _gates(original, edited, chosen["box"], settings)
    gates["resized_from"] = list(edited_image.size) if resized else None
    if failures:
        outcome.rejection = {**common, "stage": "gate", "reason": "; ".join(failures), "gates": gates,
                             "attempts": outcome.attempts}
        return outcome
    outcome.original_png = row.png
    outcome.edited_png = png_bytes(edited)
    outcome.record = _record(row, cues, chosen, outcome, gates, roles, settings)
    outcome.perception = _perception(outcome.record, cues, chosen, settings["seed"])
    attach_perception(outcome.record, outcome.perception)
    return outcome


def _gates(original: np.ndarray, edited: np.ndarray, box: list[float] | None,
           settings: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    height, width = original.shape[:2]
    changed = np.abs(original.astype(np.int16) - edited.astype(np.int16)).max(axis=-1) > OUTSIDE_DIFF
    failures = []
    if box is not None:
        margin = BOX_MARGIN * max(width, height)
        x, y, w, h = box
        region = box_mask((x - margin, y - margin, w + 2 * margin, h + 2 * margin), height, width)
        inside = box_mask(tuple(box), height, width)
        delta_e = round(mean_delta_e(original, edited, inside), 3) if inside.any() else 0.0
        outside_share = round(float(changed[~region].mean()) if (~region).any() else 0.0, 6)
        if outside_share > settings["outside_tolerance"]:
            failures.append(f"{outside_share:.3f} of the pixels outside the cue's box changed (tolerance "
                            f"{settings['outside_tolerance']})")
        if delta_e < settings["min_delta_e"]:
            failures.append(f"the change inside the cue's box is invisible: mean delta E {delta_e} < "
                            f"{settings['min_delta_e']}")
    else:
        delta_e, outside_share = round(mean_delta_e(original, edited, changed), 3) if changed.any() else 0.0, None
        if float(changed.mean()) < MIN_CHANGED_SHARE:
            failures.append(f"the edit is invisible: {float(changed.mean()):.4f} of the pixels changed")
    gates = {"delta_e": delta_e, "min_delta_e": settings["min_delta_e"], "outside_changed_pixels":
             int(changed[~box_mask(tuple(box), height, width)].sum()) if box is not None else int(changed.sum()),
             "outside_changed_share": outside_share, "outside_tolerance": settings["outside_tolerance"],
             "outside_diff": OUTSIDE_DIFF, "box": box}
    return gates, failures


def _record(row: Row, cues: list[str], chosen: dict[str, Any], outcome: RowOutcome, gates: dict[str, Any],
            roles: Roles, settings: dict[str, Any]) -> dict[str, Any]:
    plan = {"cue": chosen["cue"], "instruction": chosen["instruction"], "target": chosen["target"]}
    record_id = "vf-" + sha256_bytes(canonical_json({"dataset": settings["dataset"], "row": row.index,
                                                     "question": row.question, "plan": plan}).encode("utf-8"))[:16]
    original_sha = sha256_bytes(row.png)
    target_text = next((o["text"] for o in row.options if o["label"] == chosen["target"]), chosen["target"])
    return {
        "id": record_id, "category": row.category, "question": row.question,
        "question_type": "multiple-choice" if row.options else "free-form", "options": row.options,
        "answer_original": row.answer, "answer_edited": chosen["target"],
        "image_original": f"images/original/row-{row.index:08d}.png", "image_original_sha256": original_sha,
        "image_edited": f"images/edited/{record_id}.png", "image_edited_sha256": sha256_bytes(outcome.edited_png or b""),
        "visual_cues": [{"id": f"cue{i}", "text": cue, "bbox": chosen["box"] if i == chosen["cue"] else None}
                        for i, cue in enumerate(cues, start=1)],
        "edit": {"cue_id": f"cue{chosen['cue']}", "instruction": chosen["instruction"], "target_answer": target_text,
                 "editor": {"name": roles.editor.provider, "model": roles.editor.model}, "operation": "regenerate",
                 "attempts": outcome.attempts},
        "source": {"dataset": settings["dataset"], "split": settings["split"], "image_id": row.index, "row": row.index,
                   "file_name": None, "license": settings["license"], "attribution": settings["attribution"]},
        "verification": {"status": "pending", "annotators": [], "reasons": [], "notes": None, "task_id": None,
                         "time": None, "history": []},
        "build": {"mmfaith_version": __version__, "seed": settings["seed"], "slot": outcome.key, "template": None,
                  "facts": {"cue": cues[chosen["cue"] - 1]}, "facts_edited": {"cue": chosen["cue_after"]},
                  "models": roles.provenance(), "gates": gates},
    }


def _perception(record: dict[str, Any], cues: list[str], chosen: dict[str, Any], seed: int) -> dict[str, Any] | None:
    """The edited cue after (edited only), before (original only) and two unchanged cues (both)."""
    others = [cue for i, cue in enumerate(cues, start=1) if i != chosen["cue"]][:2]
    if len(others) < 2:
        return None
    before = cues[chosen["cue"] - 1]
    rows = [(chosen["cue_after"], True, False), (before, False, True), *((cue, True, True) for cue in others)]
    order = seeded_rng(seed, "perception", record["id"]).permutation(4)
    shuffled = [rows[int(i)] for i in order]
    labels = ("A", "B", "C", "D")
    return {
        "id": "vfp-" + sha256_bytes(f"perception:{record['id']}".encode("utf-8"))[:16], "pair_id": record["id"],
        "image": record["image_edited"], "image_sha256": record["image_edited_sha256"],
        "question": "Which of the following statements are true of this image?",
        "options": [{"label": label, "text": text} for label, (text, _, _) in zip(labels, shuffled)],
        "answers": [label for label, (_, edited, _) in zip(labels, shuffled) if edited],
        "answers_original": [label for label, (_, _, original) in zip(labels, shuffled) if original],
        "cue_before": before, "cue_after": chosen["cue_after"], "source": record["source"],
        "verification": {"status": "pending", "annotators": [], "reasons": [], "notes": None, "task_id": None,
                         "time": None, "history": []},
        "build": {"mmfaith_version": __version__, "seed": seed, "template": None, "statements_version": "vfaith-cues/1"},
    }


@dataclass
class CueBuildRequest:
    """`mmfaith build vfaith --source ...`: the dataset, its columns, the models and the gates' settings."""

    out: Path
    source: str
    columns: dict[str, str]
    roles: Roles
    split: str = "test"
    limit: int | None = None
    seed: int = 0
    max_tries: int = MAX_TRIES
    min_delta_e: float = 12.0
    outside_tolerance: float = 0.05
    category: str = "RWS"
    """The category of every row when `columns` names no category column."""
    license_name: str = "unknown"
    license_url: str = ""
    progress: bool = True


def build_cue_driven(request: CueBuildRequest) -> dict[str, Any]:
    """Build (or resume) cue-driven VFaith pairs into request.out; returns build.json's counts."""
    import time

    from tqdm import tqdm

    from mmfaith.builders.build_dir import check_recipe, recorded_build
    from mmfaith.builders.vfaith.build import Journal
    from mmfaith.dirlock import hold_lock
    from mmfaith.builders.vfaith.preview import write_preview
    from mmfaith.outdir import prepare_out_dir

    started = time.time()
    rows = open_source(request.source, request.split)
    out = prepare_out_dir(request.out, "build")
    recipe = {"family": "vfaith", "path": "cue-driven", "source": request.source, "split": request.split,
              "columns": request.columns, "models": request.roles.provenance(), "seed": request.seed,
              "max_tries": request.max_tries, "min_delta_e": request.min_delta_e,
              "outside_tolerance": request.outside_tolerance, "category": request.category}
    build_json = out / "build.json"
    check_recipe(build_json, recipe)
    for folder in ("images/original", "images/edited"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    journal = Journal(out)
    settings = {"seed": request.seed, "max_tries": request.max_tries, "min_delta_e": request.min_delta_e,
                "outside_tolerance": request.outside_tolerance, "dataset": request.source, "split": request.split,
                "license": {"id": request.license_name, "name": request.license_name, "url": request.license_url},
                "attribution": f"{request.source} ({request.split}), license {request.license_name}"}

    def body() -> dict[str, Any]:
        total = len(rows) if request.limit is None else min(request.limit, len(rows))
        journal.open()
        try:
            for index in tqdm(range(total), unit="row", desc="vfaith cues", disable=not request.progress):
                if f"row:{index}" not in journal.done:
                    row = normalise_row(index, rows[index], request.columns, f"{request.source} row {index}",
                                        request.category)
                    _journal(out, run_row(row, request.roles, settings), journal)
            write_preview(out, 8)
        finally:
            journal.close()
        return {"accepted": len(journal.pairs), "rejected_by_stage": dict(journal.rejected_reasons), "rows": total}

    with hold_lock(out, "build --out"):
        return recorded_build(build_json, recipe, {"source": {"dataset": request.source, "split": request.split}},
                              started, body, lambda counts: {"counts": counts})


def _journal(out: Path, outcome: RowOutcome, journal: Any) -> None:
    """Journal one row's outcome: images first, then the pair and perception lines, or the rejection."""
    from mmfaith.jsonl import write_atomic
    from mmfaith.schema import check_record

    journal.done.add(outcome.key)
    if outcome.record is None:
        assert outcome.rejection is not None
        journal.rejected.append(outcome.rejection)
        journal.rejected_reasons[outcome.rejection["stage"]] += 1
        return
    check_record("vfaith_pair", outcome.record, f"record {outcome.record['id']} ({outcome.key})")
    write_atomic(out / outcome.record["image_original"], outcome.original_png or b"")
    write_atomic(out / outcome.record["image_edited"], outcome.edited_png or b"")
    journal.records.append(outcome.record)
    journal.pairs.append(outcome.record)
    if outcome.perception is not None:
        check_record("vfaith_perception", outcome.perception, f"perception item of {outcome.record['id']}")
        journal.perception.append(outcome.perception)
