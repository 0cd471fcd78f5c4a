"""Official SPD-Faith-Bench response files, re-scored with mmfaith's metrics and beside the official numbers.

The file (written by the official evaluation; read by its eval/eval_multi_diff_metrics.py and
eval/eval_consistency_rate.py) is one JSON object:
  {"model": NAME, "responses": [{"sample_id": "15517",
     "ground_truth": {"num_differences": 3, "modifications": [{"type", "category", ...}]},
     "raw_response": "...", "parsed_response": {"has_structured_output": true, "predicted_num": 2,
     "structured_output": [{"type": "color", "category": "bus"}, ...]},
     "response_same": "...", "response_different": "..."}]}   (the last two where present)

Conversion into the answers mmfaith scores (`answers_of`), per row:
- count: `predicted_num`, as "\\boxed{N}" (absent or not an integer: no answer, `missing`);
- describe: `structured_output` as a fenced JSON list of {"type", "object"} (read by the rule
  judge as any describe answer), or, without structured output, `raw_response` (the judge reads
  the claims from the text); neither: missing;
- same / different: `response_same` / `response_different` as they are (absent: missing).

Gold: the rows are matched by sample_id to the imported build given as --dataset (a record's
source.official image_id or qid, or its id); a sample_id that matches no record, or several that
the file's ground truth cannot tell apart, is an error naming the row. Each disagreement between
the file's ground_truth (count, and the multiset of (type, category)) and the build is listed in
metrics.json (`official.gold_disagreements`) and the report; the build is the gold. Only the
matched pairs are scored. Without a dataset (ScoreRequest.dataset None) each row's own
ground_truth is the gold (`gold_from_file`; said in the report); the `mmfaith score` CLI requires
--dataset today, so that path is reachable from Python only.

Metrics the file cannot support are null with the reason in `official.not_computable`, never 0:
DS / DQR / existence_rate without any predicted_num; TF1 / CF1 / DRF / DRF_coverage without any
structured_output or raw_response; contradiction_rate / consistency_ratio / yes_ratio_same
without the response_same / response_different pair.

`official_script_numbers` reimplements the official formulas (eval_multi_diff_metrics.py, read
in the public repository Johanson-colab/SPD-Faith-Bench) so the report can show both:
- rows without parsed_response.has_structured_output are skipped;
- "DQR (Avg Num Recall)" = mean over those rows of p / g with p = len(structured_output) and g =
  len(ground_truth.modifications) (0 when g = 0). For p <= g this is 1 - (g - p) / g, the paper's
  DS (appendix B.2.1, eq. 9), not the paper's DQR (eq. 8, 1[p = g]); for p > g it exceeds 1 where
  DS falls, so over-claiming is rewarded;
- TF1: per type t of color / remove / position, matched = min(#pred of t, #gold of t) (0 without
  gold of t), types compared as exact strings; micro P = sum matched / sum pred, R = sum matched /
  sum gold, F1 = 2PR / (P + R) (0 when P or R is undefined);
- CF1: matched = the number of predicted categories found anywhere among the gold categories
  (exact strings), so a category claimed twice on a row with one such gold difference matches
  twice (mmfaith: multiset intersection, once); micro P, R, F1 as for TF1;
- CR: eval_consistency_rate.py asks GPT-4o-mini to label claims: not reproducible offline, not
  computed here.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError, first_few
from mmfaith.evaluators.spd_faith.claims import CLAIM_TYPES
from mmfaith.loaders.spd_faith.difference_types import TYPE_SYNONYMS
from mmfaith.evaluators.spd_faith.metrics import Answer
from mmfaith.images import sha256_bytes

FORMATS = ("auto", "predictions", "official")
NEEDS = {
    "count": (("DS", "DQR", "existence_rate"), "no row has parsed_response.predicted_num (the count answer)"),
    "describe": (("TF1", "CF1", "DRF", "DRF_coverage"),
                 "no row has parsed_response.structured_output or raw_response (the claimed differences)"),
    "pair": (("contradiction_rate", "consistency_ratio", "yes_ratio_same"),
             "no row has response_same and response_different (the same / different pair that "
             "eval_consistency_rate.py reads)"),
}


@dataclass(frozen=True)
class OfficialRow:
    """One row of an official response file (module docstring), as read."""

    index: int
    sample_id: str
    gold_modifications: list[dict[str, Any]]
    gold_num: int | None
    raw_response: str | None
    parsed: dict[str, Any]
    response_same: str | None
    response_different: str | None


@dataclass(frozen=True)
class OfficialFile:
    model: str
    rows: list[OfficialRow]
    sha256: str


MAX_OFFICIAL_BYTES = 1 << 30
"""The largest file tried as an official response file (1 GiB)."""


def looks_official(path: Path) -> bool:
    """True when the file is one JSON object with a `responses` list (the official shape), not JSONL; a file that
    is not a regular one (/dev/zero, a pipe) or larger than MAX_OFFICIAL_BYTES is not read here. A file whose first
    non-blank line is a JSON value other than such an object (a predictions.jsonl) is decided from that line: the
    whole file (hundreds of MB at 100,000 pairs, held twice while parsed) is read only when it may be one."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_OFFICIAL_BYTES:
            return False
        with path.open("rb") as handle:
            first = next((line for line in iter(lambda: handle.readline(MAX_OFFICIAL_BYTES), b"") if line.strip()), b"")
        try:
            head = json.loads(first)
        except ValueError:  # a JSON object spread over lines, or not JSON at all: read whole below
            head = None
        if head is not None and not (isinstance(head, dict) and "responses" in head):
            return False
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("responses"), list)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def read_official(path: Path) -> OfficialFile:
    """Read and check an official response file; one MmfaithError lists every bad row."""
    try:
        data_bytes = path.read_bytes()
        data = json.loads(data_bytes)
    except OSError as exc:
        raise MmfaithError(f"{path}: cannot read the response file ({exc.strerror}).") from exc
    except ValueError as exc:
        raise MmfaithError(f"{path}: not JSON ({exc}); an official response file is one JSON object "
                           "{\"model\", \"responses\": [...]}.") from exc
    if not isinstance(data, dict) or not isinstance(data.get("responses"), list):
        raise MmfaithError(f"{path}: not an official response file (no top-level \"responses\" list); "
                           "drop --format official to score predictions.jsonl.")
    rows, problems = [], []
    for index, item in enumerate(data["responses"]):
        where = f"responses[{index}]"
        if not isinstance(item, dict) or item.get("sample_id") in (None, ""):
            problems.append(f"{where}: needs a sample_id")
            continue
        truth = item.get("ground_truth") if isinstance(item.get("ground_truth"), dict) else {}
        modifications = truth.get("modifications") if isinstance(truth.get("modifications"), list) else []
        parsed = item.get("parsed_response") if isinstance(item.get("parsed_response"), dict) else {}
        structured = parsed.get("structured_output")
        if structured is not None and not (isinstance(structured, list) and all(isinstance(s, dict) for s in structured)):
            problems.append(f"{where}.parsed_response.structured_output: a list of objects, not {structured!r:.60}")
            continue
        num = truth.get("num_differences")
        rows.append(OfficialRow(index, str(item["sample_id"]), modifications, num if isinstance(num, int) else None,
                                _text(item.get("raw_response")), parsed, _text(item.get("response_same")),
                                _text(item.get("response_different"))))
    if problems:
        raise MmfaithError(f"{path}: {len(problems)} bad row(s), fix them and score again: {first_few(problems)}")
    if not rows:
        raise MmfaithError(f"{path}: the responses list is empty; nothing to score.")
    return OfficialFile(str(data.get("model") or "unknown"), rows, sha256_bytes(data_bytes))


def answers_of(row: OfficialRow) -> dict[str, Answer]:
    """The four probes' answers of one row (module docstring)."""
    predicted = row.parsed.get("predicted_num")
    count = Answer(f"\\boxed{{{predicted}}}") if isinstance(predicted, int) and not isinstance(predicted, bool) \
        else Answer(None)
    structured = row.parsed.get("structured_output")
    if row.parsed.get("has_structured_output") and isinstance(structured, list):
        claims = [{"type": str(s.get("type") or ""), "object": str(s.get("category") or "")} for s in structured]
        describe = Answer("```json\n" + json.dumps(claims, ensure_ascii=False) + "\n```")
    else:
        describe = Answer(row.raw_response)
    return {"same": Answer(row.response_same), "different": Answer(row.response_different),
            "count": count, "describe": describe}


def _gold_key(modifications: Sequence[dict[str, Any]]) -> Counter:
    return Counter((str(m.get("type", "")).strip().lower(), str(m.get("category", "")).strip().lower())
                   for m in modifications)


def match_rows(path: Path, official: OfficialFile, pairs: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """The dataset pair of each row (in file order) and the gold disagreements; MmfaithError for unmatched rows."""
    index: dict[str, list[Any]] = {}
    for pair in pairs:
        source = pair.record["source"].get("official") or {}
        for key in {pair.id, str(source.get("image_id", "")), str(source.get("qid", ""))} - {""}:
            index.setdefault(key, []).append(pair)
    matched, problems, disagreements, seen = [], [], [], {}
    for row in official.rows:
        where = f"responses[{row.index}] sample_id {row.sample_id}"
        candidates = index.get(row.sample_id, [])
        if len(candidates) > 1:
            same_gold = [p for p in candidates if _gold_key(p.record["differences"]) == _gold_key(row.gold_modifications)]
            candidates = same_gold if len(same_gold) == 1 else candidates
        if len(candidates) != 1:
            problems.append(f"{where}: " + ("matches no record of the dataset" if not candidates else
                            f"matches {len(candidates)} records ({', '.join(p.id for p in candidates)}) and its "
                            "ground truth does not tell them apart"))
            continue
        pair = candidates[0]
        if pair.id in seen:
            problems.append(f"{where}: a second row for {pair.id} (first: responses[{seen[pair.id]}])")
            continue
        seen[pair.id] = row.index
        gold = pair.record
        if row.gold_num is not None and row.gold_num != gold["num_differences"]:
            disagreements.append(f"{where} ({pair.id}): num_differences {row.gold_num} in the file, "
                                 f"{gold['num_differences']} in the dataset")
        if _gold_key(row.gold_modifications) != _gold_key(gold["differences"]):
            shown = sorted(f"{t} {c}" for t, c in _gold_key(row.gold_modifications).elements())
            built = sorted(f"{t} {c}" for t, c in _gold_key(gold["differences"]).elements())
            disagreements.append(f"{where} ({pair.id}): modifications {shown} in the file, {built} in the dataset")
        matched.append(pair)
    if problems:
        raise MmfaithError(f"{path}: {len(problems)} row(s) cannot be matched to --dataset: {first_few(problems)}. Pass the build imported from the same "
                           "official release (mmfaith build spd-faith --from-official).")
    return matched, disagreements


def gold_from_file(official: OfficialFile) -> list[dict[str, Any]]:
    """Pair records (for scoring only: no images are read) whose gold is each row's own ground_truth.

    Used when no --dataset is given: id `official-<sample_id>`, subset by the count (1 single, 2+
    multi, 0 control), difficulty unknown (null), types normalised with the judge's TYPE_SYNONYMS,
    categories lower-cased, colors unknown; the bootstrap unit is the sample."""
    records = []
    for row in official.rows:
        differences = []
        for m in row.gold_modifications:
            kind = str(m.get("type", "")).strip().lower()
            category = str(m.get("category", "")).strip().lower()
            differences.append({"type": TYPE_SYNONYMS.get(kind, kind), "category": category, "color_before": None,
                                "color_after": None, "description": f"{kind} {category}".strip()})
        n = len(differences)
        records.append({"id": f"official-{row.sample_id}", "subset": "control" if n == 0 else "single" if n == 1
                        else "multi", "difficulty": None, "num_differences": n, "differences": differences,
                        "source": {"dataset": "official-response-file", "file_name": row.sample_id}})
    return records


def not_computable(official: OfficialFile) -> dict[str, str]:
    """Metric -> why the file cannot support it (module docstring)."""
    have = {"count": any(answers_of(r)["count"].response is not None for r in official.rows),
            "describe": any(answers_of(r)["describe"].response is not None for r in official.rows),
            "pair": any(r.response_same is not None and r.response_different is not None for r in official.rows)}
    return {metric: reason for need, (metrics, reason) in NEEDS.items() if not have[need] for metric in metrics}


def _f1(matched: int, pred: int, gold: int) -> dict[str, float | None]:
    precision = matched / pred if pred else None
    recall = matched / gold if gold else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def official_script_numbers(rows: Sequence[OfficialRow]) -> dict[str, Any]:
    """The official eval_multi_diff_metrics.py's numbers on these rows (module docstring), reimplemented."""
    valid = [r for r in rows if r.parsed.get("has_structured_output", False)]
    recalls, by_type, cat = [], {t: [0, 0, 0] for t in CLAIM_TYPES}, [0, 0, 0]
    for row in valid:
        gold = row.gold_modifications
        pred = row.parsed.get("structured_output") or []
        recalls.append(len(pred) / len(gold) if gold else 0.0)
        gold_types = [m["type"] for m in gold]
        pred_types = [p.get("type", "") for p in pred if p.get("type")]
        for t in CLAIM_TYPES:
            g, p = gold_types.count(t), pred_types.count(t)
            by_type[t][0] += min(p, g) if g > 0 else 0
            by_type[t][1] += p
            by_type[t][2] += g
        gold_cats = [m["category"] for m in gold]
        pred_cats = [p.get("category", "") for p in pred if p.get("category")]
        cat[0] += sum(1 for c in pred_cats if c in gold_cats)
        cat[1] += len(pred_cats)
        cat[2] += len(gold_cats)
    overall = [sum(v[i] for v in by_type.values()) for i in range(3)]
    return {"total_samples": len(valid), "skipped_without_structured_output": len(rows) - len(valid),
            "avg_num_recall": sum(recalls) / len(valid) if valid else 0.0,
            "TF1": _f1(*overall), "TF1_by_type": {t: _f1(*by_type[t]) for t in CLAIM_TYPES}, "CF1": _f1(*cat),
            "CR": None, "CR_note": "eval_consistency_rate.py asks GPT-4o-mini; not reproducible offline"}


def official_block(official: OfficialFile, disagreements: list[str], n_matched: int,
                   gold: str = "dataset") -> dict[str, Any]:
    """metrics.json's `official` block: input, gold (dataset or file), what cannot be computed, the official numbers."""
    return {"format": "official", "model": official.model, "n_rows": len(official.rows), "n_matched": n_matched,
            "gold": gold, "gold_disagreements": disagreements,
            "not_computable": not_computable(official), "official_script": official_script_numbers(official.rows)}


def apply_not_computable(metrics: dict[str, Any]) -> None:
    """Null every metric the file cannot support, in overall, ci95 and by_difficulty (never report 0)."""
    blocked = metrics["official"]["not_computable"]
    blocks = [metrics["overall"], metrics["ci95"], *metrics["by_difficulty"].values(),
              *(b["ci95"] for b in metrics["by_difficulty"].values())]
    for block in blocks:
        for metric in blocked:
            if metric in block:
                block[metric] = None
    if "TF1" in blocked:
        for block in (metrics["overall"], *metrics["by_difficulty"].values()):
            block["TF1_by_type"] = {t: {"precision": None, "recall": None, "f1": None} for t in CLAIM_TYPES}


def _number(value: float | None) -> str:
    return "not computable" if value is None else f"{value:.4f}"


def comparison_markdown(metrics: dict[str, Any]) -> str:
    """The report section for an official response file: mmfaith's metrics next to the official script's."""
    block, overall = metrics["official"], metrics["overall"]
    script = block["official_script"]
    blocked = block["not_computable"]

    def ours(name: str) -> str:
        return f"not computable ({blocked[name]})" if name in blocked else _number(overall.get(name))

    lines = [
        "\n## Official SPD-Faith-Bench response file\n",
        f"Input: an official response file of model `{block['model']}`, {block['n_rows']} rows, "
        + (f"{block['n_matched']} matched by sample_id to the dataset, which is the gold. " if block["gold"] == "dataset"
           else "scored against the file's own ground_truth (no --dataset: no images, no tiers, no colors). ")
        + 
        f"The official script scores {script['total_samples']} of them (it skips "
        f"{script['skipped_without_structured_output']} without structured output); mmfaith scores all matched rows.\n",
    ]
    if block["gold_disagreements"]:
        lines.append(f"\n{len(block['gold_disagreements'])} disagreement(s) between the file's ground truth and the "
                     "dataset (the dataset is used):\n\n" + "".join(f"- {d}\n" for d in block["gold_disagreements"]))
    else:
        lines.append("\nThe file's ground truth agrees with the dataset on every matched row.\n")
    if blocked:
        lines.append("\nNot computable from this file: " + "; ".join(f"{m} ({r})" for m, r in blocked.items()) + ".\n")
    lines += [
        "\n| metric | mmfaith | official script | why they differ |\n|---|---|---|---|\n",
        f"| DQR | {ours('DQR')} | {_number(script['avg_num_recall'])} (printed as \"DQR (Avg Num Recall)\") | "
        "mmfaith: share of rows whose predicted_num equals g (paper eq. 8). The script: mean of p / g with p the "
        "number of structured claims; that is the paper's DS (eq. 9) where p <= g, and exceeds 1 where p > g |\n",
        f"| DS | {ours('DS')} | none (see DQR) | mmfaith: mean max(0, 1 - abs(p - g) / g) with p = predicted_num |\n",
        f"| TF1 | {ours('TF1')} | {_number(script['TF1']['f1'])} | mmfaith: types normalised (synonyms), rows "
        "without structured output read from raw_response; the script: exact type strings, such rows skipped |\n",
        f"| CF1 | {ours('CF1')} | {_number(script['CF1']['f1'])} | mmfaith: multiset intersection of normalised COCO "
        "categories (a category matches once per gold instance); the script counts every predicted category "
        "found among the gold ones, so two claims of one gold \"dog\" match twice |\n",
        f"| CR | {ours('consistency_ratio')} | not computed (GPT-4o-mini judge) | mmfaith: rule judge, one-to-one "
        "claim pairing; the script: an LLM's labels |\n",
        f"| DRF | {ours('DRF')} | none in these scripts | mmfaith: describe claims matched one to one to the gold |\n",
    ]
    return "".join(lines)
