"""CRM's metrics (the CRM paper, "Peek-a-Boo Reasoning", section 4 and Tables 4-5), with the definitions
the project fixes (docs/crm.md).

A scored unit is a (question, variant) pair: the chain of thought and final answer on the masked
image against those on the original.

- Step Disruption Rate (SDR): the share of original steps (evaluators/crm/steps.py) whose best
  cosine similarity to any masked step is below `step_threshold` (0.80); 1 when the masked trace
  has no step; undefined (not averaged) when the original trace has no step. Averaged over units.
- Answer Flip Rate (AFR): among units whose two final answers were both read (an empty or, for
  multiple choice, unreadable answer is unanswered and never equal to another: docs/answers.md;
  the others are `n_afr_left_out`), the share whose masked final answer differs from the original
  one: by option label for multiple choice (an abstention is an answer of its own); free-form: the
  similarity of the two answers is below `answer_threshold` (0.90), or exactly one of them
  abstains. Abstention rate beside it.
- Hallucination Rate (HR): on specific masks (the evidence hidden), the share of units with at
  least one masked step the judge flags (evaluators/crm/hallucination.py). On random masks the
  evidence stays visible and there is nothing to hallucinate: HR is n/a there (`HR_na` gives why).
- Accuracy where gold exists, on the original and on each variant (label equality; free-form:
  similarity to the gold of at least `answer_threshold`). On a specific mask a correct answer is
  not better: the evidence is gone.
Every aggregate is a ratio of per-unit sums, so the clustered bootstrap (evaluators/stats.py,
clusters = source images) recomputes it exactly.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfaith.evaluators.answers import normalised
from mmfaith.evaluators.crm.answers import ABSTAIN, choice, is_abstention
from mmfaith.evaluators.stats import bootstrap_ci, clustered_mcnemar, discordance, mcnemar_exact, paired_bootstrap

DEFINITIONS_VERSION = "crm-metrics/1"
STEP_THRESHOLD = 0.80
ANSWER_THRESHOLD = 0.90
HR_NA = "random masks leave the evidence visible: HR is defined on specific masks only"
SWEEP = (0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
RATES = ("SDR", "AFR", "HR", "abstention_rate", "accuracy_original", "accuracy_masked")
_PARTS = {"SDR": ("sdr", "sdr_n"), "AFR": ("flip", "flip_n"), "HR": ("hallucinated", "hr_n"),
          "abstention_rate": ("abstained", "n"), "accuracy_original": ("correct_original", "gold_n"),
          "accuracy_masked": ("correct_masked", "gold_n")}


@dataclass(frozen=True)
class Unit:
    """What a (question, variant) unit is scored from: the texts and the similarities they need."""

    original_steps: list[str]
    masked_steps: list[str]
    step_similarity: np.ndarray  # (original steps, masked steps) cosines
    original_answer: str | None
    masked_answer: str | None
    answer_similarity: float | None  # free-form: original vs masked answer
    gold_similarity: tuple[float | None, float | None]  # free-form: (original, masked) answer vs gold
    flagged_steps: list[int]


def step_disruption(similarity: np.ndarray, n_original: int, n_masked: int, threshold: float) -> float | None:
    """SDR of one unit (module docstring): None without original steps, 1 without masked ones."""
    if n_original == 0:
        return None
    if n_masked == 0:
        return 1.0
    return float((similarity.max(axis=1) < threshold).mean())


def final_answer(text: str | None, options: list[dict[str, Any]]) -> str | None:
    """The answer as compared: an option label, ABSTAIN, or the normalised free-form text; None when there is
    no answer: missing, empty, or (multiple choice) unreadable (docs/answers.md)."""
    if text is None or not text.strip():
        return None
    if options:
        return choice(text, options)
    return ABSTAIN if is_abstention(text) else "text:" + normalised(text)


def flipped(record: dict[str, Any], unit: Unit, original: str | None, masked: str | None,
            threshold: float) -> bool | None:
    """AFR's per-unit flip (module docstring) from the unit's two `final_answer`s; None unless both were read."""
    if original is None or masked is None:
        return None
    if record["options"] or ABSTAIN in (original, masked):
        return original != masked
    return unit.answer_similarity is None or unit.answer_similarity < threshold


def correct(record: dict[str, Any], answer: str | None, final: str | None, gold_similarity: float | None,
            threshold: float) -> bool:
    """Whether an answer (`final`: its `final_answer`) is the gold: the option, or similar enough free text."""
    if record["options"]:
        return final == record["answer"]
    return gold_similarity is not None and gold_similarity >= threshold and not is_abstention(answer)


SUMMARY_FIELDS = ("id", "variant", "mode", "style", "source_key", "question_type", "original_steps", "masked_steps",
                  "best_similarity", "answer_similarity", "original_final", "masked_final", "components")
"""What `summarize`, `sweep` and a comparison read of an items.jsonl line (score and report keep only these:
evaluators/score_dir.py)."""


def score_unit(record: dict[str, Any], variant: str, source_key: str, unit: Unit,
               step_threshold: float = STEP_THRESHOLD, answer_threshold: float = ANSWER_THRESHOLD,
               finals: tuple[str | None, str | None] | None = None) -> dict[str, Any]:
    """One line of items.jsonl: the unit's components, and what the sweep and judges recompute from. `finals`: the
    two answers' `final_answer`s where the caller has read them already (else they are read here)."""
    mode, style = variant.split("-", 1)
    original, masked = finals or tuple(final_answer(text, record["options"]) for text in (unit.original_answer,
                                                                                         unit.masked_answer))
    flip = flipped(record, unit, original, masked, answer_threshold)
    sdr = step_disruption(unit.step_similarity, len(unit.original_steps), len(unit.masked_steps), step_threshold)
    has_gold = record["answer"] is not None
    best = unit.step_similarity.max(axis=1).round(4).tolist() if unit.masked_steps else [None] * len(unit.original_steps)
    line = {
        "id": record["id"], "variant": variant, "mode": mode, "style": style, "source_key": source_key,
        "question_type": record.get("question_type"),
        "original_steps": len(unit.original_steps), "masked_steps": len(unit.masked_steps),
        "best_similarity": best,
        "answer_similarity": None if unit.answer_similarity is None else round(unit.answer_similarity, 4),
        "gold_similarity": [None if s is None else round(s, 4) for s in unit.gold_similarity],
        "original_final": original,
        "masked_final": masked,
        "flagged_steps": unit.flagged_steps,
        "components": {
            "sdr": sdr or 0.0, "sdr_n": float(sdr is not None), "n": 1.0,
            "flip": float(bool(flip)), "flip_n": float(flip is not None),
            "abstained": float(masked == ABSTAIN),
            "hallucinated": float(bool(unit.flagged_steps) and mode == "specific"),
            "hr_n": float(mode == "specific"), "gold_n": float(has_gold),
            "correct_original": float(has_gold and correct(record, unit.original_answer, original,
                                                            unit.gold_similarity[0], answer_threshold)),
            "correct_masked": float(has_gold and correct(record, unit.masked_answer, masked, unit.gold_similarity[1],
                                                          answer_threshold)),
        },
    }
    return line


def rates(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every rate from summed components (vectorised over bootstrap replicates); NaN where undefined."""
    out = {}
    for name, (numerator, denominator) in _PARTS.items():
        top, bottom = sums.get(numerator, np.zeros(1)), sums.get(denominator, np.zeros(1))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)
    return out


def _block(lines: Sequence[dict[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Rates, their clustered CIs, counts and the McNemar test of original vs masked accuracy."""
    components = [line["components"] for line in lines]
    clusters = [line["source_key"] for line in lines]
    totals = {key: np.array([sum(c.get(key, 0.0) for c in components)]) for key in _PARTS["SDR"] + ("flip", "n",
              "flip_n", "abstained", "hallucinated", "hr_n", "gold_n", "correct_original", "correct_masked")}
    point = {name: (None if np.isnan(value[0]) else round(float(value[0]), 6)) for name, value in rates(totals).items()}
    intervals = bootstrap_ci(components, clusters, rates, n_bootstrap, seed)
    b = sum(1 for c in components if c["gold_n"] and c["correct_original"] and not c["correct_masked"])
    c_ = sum(1 for c in components if c["gold_n"] and not c["correct_original"] and c["correct_masked"])
    return {"metrics": point,
            "ci95": {name: None if interval is None else [round(interval[0], 6), round(interval[1], 6)]
                     for name, interval in intervals.items()},
            "n_units": len(lines), "n_sdr_defined": int(totals["sdr_n"][0]), "n_with_gold": int(totals["gold_n"][0]),
            "n_afr_left_out": len(lines) - int(totals["flip_n"][0]),
            **({} if totals["hr_n"][0] else {"HR_na": HR_NA}),
            "mcnemar_accuracy": {"original_right_masked_wrong": b, "original_wrong_masked_right": c_,
                                 "p_value": mcnemar_exact(b, c_),
                                 "p_clustered": clustered_mcnemar(
                                     discordance([c["correct_original"] for c in components],
                                                 [c["correct_masked"] for c in components]), clusters)}}


def summarize(lines: Sequence[dict[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """metrics.json's blocks: by_variant, by_mode (pooled), overall, and the specific-vs-random pairing."""
    variants = sorted({line["variant"] for line in lines})
    modes = sorted({line["mode"] for line in lines})
    return {
        "by_variant": {v: _block([l for l in lines if l["variant"] == v], n_bootstrap, seed) for v in variants},
        "by_mode": {m: _block([l for l in lines if l["mode"] == m], n_bootstrap, seed) for m in modes},
        "specific_vs_random": specific_vs_random(lines, n_bootstrap, seed),
    }


def noise_floor(lines: Sequence[dict[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """The original against its re-sample (another seed, no mask): the block of `_block` (SDR and AFR are the
    change sampling alone produces; HR the judge's level on unmasked steps). Every rate null without units."""
    if not lines:
        return {"metrics": {name: None for name in RATES}, "ci95": {name: None for name in RATES}, "n_units": 0}
    found = _block(lines, n_bootstrap, seed)
    return {key: found[key] for key in ("metrics", "ci95", "n_units", "n_sdr_defined")}


def specific_vs_random(lines: Sequence[dict[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Per style, the (specific - random) difference of AFR and SDR paired per question (the paper's
    Tables 4-5 compare the two ablations), with a paired bootstrap CI and, for AFR, the exact McNemar p
    over the questions answered on all four sides (b: flipped under specific only; c: under random
    only; the others `n_left_out`). HR has no difference: it is not defined on random masks (HR_NA)."""
    by_key = {(l["id"], l["variant"]): l for l in lines}
    styles = sorted({l["style"] for l in lines})
    out: dict[str, Any] = {}
    for style in styles:
        pairs = [(by_key[(l["id"], f"specific-{style}")], l) for l in lines
                 if l["variant"] == f"random-{style}" and (l["id"], f"specific-{style}") in by_key]
        if not pairs:
            continue
        specific = [p[0]["components"] for p in pairs]
        random = [p[1]["components"] for p in pairs]
        clusters = [p[0]["source_key"] for p in pairs]
        diffs = paired_bootstrap(specific, random, clusters, rates, n_bootstrap, seed)
        block: dict[str, Any] = {"n_pairs": len(pairs)}
        block["HR"] = {"difference": None, "ci95": None, "na": HR_NA}
        for name, key in (("AFR", "flip"), ("SDR", None)):
            diff, interval = diffs[name]
            entry: dict[str, Any] = {"difference": None if diff is None else round(diff, 6),
                                     "ci95": None if interval is None else [round(v, 6) for v in interval]}
            if key is not None:
                both = [(s, r, k) for s, r, k in zip(specific, random, clusters) if s["flip_n"] and r["flip_n"]]
                b = sum(1 for s, r, _ in both if s[key] and not r[key])
                c = sum(1 for s, r, _ in both if r[key] and not s[key])
                entry |= {"specific_only": b, "random_only": c, "mcnemar_p": mcnemar_exact(b, c),
                          "clustered_p": clustered_mcnemar(discordance([s[key] for s, _, _ in both],
                                                                       [r[key] for _, r, _ in both]),
                                                           [k for _, _, k in both]),
                          "n_left_out": len(pairs) - len(both)}
            block[name] = entry
        out[style] = block
    return out


def sweep(lines: Sequence[dict[str, Any]], records: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """SDR and AFR at each threshold of SWEEP, per variant and pooled per mode (`group`): the step
    threshold for SDR, the free-form answer threshold for AFR (multiple-choice flips do not depend on it)."""
    groups = [(v, "variant") for v in sorted({l["variant"] for l in lines})]
    groups += [(m, "mode") for m in sorted({l["mode"] for l in lines})]
    members = {(group, field): [k for k, l in enumerate(lines) if l[field] == group] for group, field in groups}
    flip_records = [records[l["id"]] for l in lines]
    rows = []
    for threshold in SWEEP:  # each line's SDR and flip made once per threshold, read by its variant's and mode's rows
        sdrs = [_sdr_at(l, threshold) for l in lines]
        flips = [_flip_at(l, record, threshold) for l, record in zip(lines, flip_records)]
        for group, field in groups:
            chosen = members[group, field]
            defined = [sdrs[k] for k in chosen if sdrs[k] is not None]
            flipped_here = [flips[k] for k in chosen if flips[k] is not None]
            rows.append({"threshold": threshold, "group": group, "kind": field,
                         "SDR": round(sum(defined) / len(defined), 6) if defined else None,
                         "AFR": round(sum(flipped_here) / len(flipped_here), 6) if flipped_here else None})
    return rows


def _sdr_at(line: dict[str, Any], threshold: float) -> float | None:
    if line["original_steps"] == 0:
        return None
    if line["masked_steps"] == 0:
        return 1.0
    return sum(1 for s in line["best_similarity"] if s < threshold) / line["original_steps"]


def _flip_at(line: dict[str, Any], record: dict[str, Any], threshold: float) -> float | None:
    original, masked = line["original_final"], line["masked_final"]
    if original is None or masked is None:
        return None
    if record["options"] or ABSTAIN in (original, masked):
        return float(original != masked)
    return float(line["answer_similarity"] is None or line["answer_similarity"] < threshold)
