"""CRM's summaries from a `UnitTable` (evaluators/crm/metrics.py): the units' items.jsonl lines folded into numbers,
in chunks, give the numbers the definitions give when computed from the lines themselves (docs/crm.md: SDR and
AFR at each threshold of the sweep, a unit's flip there by `flip_at`, the blocks' rates, their clustered intervals
and McNemar tests, the specific-vs-random pairs), for multiple-choice and free-form units, units without steps,
abstentions and units whose answers were not both read."""
from __future__ import annotations

import random

import numpy as np
import pytest

from mmfaith.evaluators.crm.answers import ABSTAIN
from mmfaith.evaluators.crm.metrics import (SWEEP, Unit, UnitTable, flip_at, noise_floor, rates, score_unit,
                                            summarize, sweep)
from mmfaith.evaluators.stats import bootstrap_ci, paired_bootstrap

VARIANTS = ("specific-black", "random-black", "specific-blur", "random-blur")


def _lines(n_questions: int, seed: int) -> list[tuple[dict, bool]]:
    """(line, multiple choice) of random units of `n_questions` questions on a few source images: each question
    has a random subset of the variants (so some specific units have no random partner and the reverse)."""
    rng = random.Random(seed)
    out = []
    for q in range(n_questions):
        options = rng.random() < 0.5
        record = {"id": f"crm-{q:016x}", "question": "What is there?", "question_type": "count",
                  "options": [{"label": "A", "text": "1"}, {"label": "B", "text": "2"}] if options else [],
                  "answer": rng.choice(["A", "B"]) if options else rng.choice(["two cats", None])}
        for variant in sorted(rng.sample(VARIANTS, rng.randint(1, 4)), key=VARIANTS.index):
            n_original, n_masked = rng.choice([0, 1, 3, 5]), rng.choice([0, 2, 4])
            similarity = np.round(np.array([rng.random() for _ in range(n_original * n_masked)]), 3).reshape(
                n_original, n_masked)
            answers = [rng.choice([None, "A", "B", "Cannot be determined."] if options else
                                  [None, "two cats", "Cannot be determined.", "a dog"]) for _ in range(2)]
            finals = tuple(None if a is None else (ABSTAIN if a.startswith("Cannot") else
                                                   (a if options else "text:" + a)) for a in answers)
            free_similarity = None if options or rng.random() < 0.2 else rng.choice([0.7, 0.8, 0.85, 0.9, 0.93, 1.0])
            unit = Unit([f"o{k}" for k in range(n_original)], [f"m{k}" for k in range(n_masked)], similarity,
                        answers[0], answers[1], free_similarity,
                        (None, None) if options else (rng.random(), rng.random()),
                        [0] if n_masked and rng.random() < 0.3 else [])
            line = score_unit(record, variant, f"coco/{rng.randint(0, 5)}.jpg", unit, finals=finals)
            out.append((line, options))
    return out


def _table(lines: list[tuple[dict, bool]], chunk: int) -> UnitTable:
    """The lines folded `chunk` questions at a time into chunk tables, merged as the scorer merges them."""
    table, part, questions, last = UnitTable(), UnitTable(), 0, None
    for line, options in lines:
        if line["id"] != last:
            questions, last = questions + 1, line["id"]
            if questions > 1 and (questions - 1) % chunk == 0:
                table.extend(part)
                part = UnitTable()
        part.add(line, options)
    table.extend(part)
    return table


def _sdr_at(line: dict, threshold: float) -> float | None:
    if line["original_steps"] == 0:
        return None
    if line["masked_steps"] == 0:
        return 1.0
    return sum(1 for s in line["best_similarity"] if s < threshold) / line["original_steps"]


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_summaries_equal_the_definitions_on_the_lines(chunk: int) -> None:
    lines = _lines(120, seed=chunk)
    table = _table(lines, chunk)
    assert len(table) == len(lines) and table.n_questions == 120

    expected_sweep = []
    groups = [(v, "variant") for v in sorted({l["variant"] for l, _ in lines})]
    groups += [(m, "mode") for m in sorted({l["mode"] for l, _ in lines})]
    for threshold in SWEEP:
        for group, kind in groups:
            chosen = [(l, o) for l, o in lines if l[kind] == group]
            sdrs = [s for l, _ in chosen if (s := _sdr_at(l, threshold)) is not None]
            flips = [f for l, o in chosen if (f := flip_at(l, o, threshold)) is not None]
            expected_sweep.append({"threshold": threshold, "group": group, "kind": kind,
                                   "SDR": round(sum(sdrs) / len(sdrs), 6) if sdrs else None,
                                   "AFR": round(sum(flips) / len(flips), 6) if flips else None})
    assert sweep(table) == expected_sweep
    assert any(row["AFR"] not in (None, 0.0, 1.0) for row in expected_sweep)

    summary = summarize(table, 200, 3)
    for variant in sorted({l["variant"] for l, _ in lines}):
        chosen = [l for l, _ in lines if l["variant"] == variant]
        block = summary["by_variant"][variant]
        components = [l["components"] for l in chosen]
        totals = {key: np.array([sum(c[key] for c in components)]) for key in components[0]}
        assert block["metrics"] == {name: None if np.isnan(v[0]) else round(float(v[0]), 6)
                                    for name, v in rates(totals).items()}
        intervals = bootstrap_ci(components, [l["source_key"] for l in chosen], rates, 200, 3)
        assert block["ci95"] == {name: None if i is None else [round(i[0], 6), round(i[1], 6)]
                                 for name, i in intervals.items()}
        assert block["n_units"] == len(chosen)
        assert block["mcnemar_accuracy"]["original_right_masked_wrong"] == sum(
            1 for c in components if c["gold_n"] and c["correct_original"] and not c["correct_masked"])
    for mode in ("specific", "random"):
        assert summary["by_mode"][mode]["n_units"] == sum(l["mode"] == mode for l, _ in lines)

    by_key = {(l["id"], l["variant"]): l for l, _ in lines}
    for style in ("black", "blur"):
        pairs = [(by_key[(l["id"], f"specific-{style}")], l) for l, _ in lines
                 if l["variant"] == f"random-{style}" and (l["id"], f"specific-{style}") in by_key]
        block = summary["specific_vs_random"][style]
        assert 0 < block["n_pairs"] == len(pairs) < sum(l["variant"] == f"random-{style}" for l, _ in lines)
        diffs = paired_bootstrap([s["components"] for s, _ in pairs], [r["components"] for _, r in pairs],
                                 [s["source_key"] for s, _ in pairs], rates, 200, 3)
        assert block["SDR"]["difference"] == (None if diffs["SDR"][0] is None else round(diffs["SDR"][0], 6))
        both = [(s, r) for s, r in pairs if s["components"]["flip_n"] and r["components"]["flip_n"]]
        assert block["AFR"]["specific_only"] == sum(1 for s, r in both
                                                    if s["components"]["flip"] and not r["components"]["flip"])
        assert block["AFR"]["n_left_out"] == len(pairs) - len(both)

    assert noise_floor(UnitTable(), 200, 3)["n_units"] == 0
    every = [l["components"] for l, _ in lines]
    floor = noise_floor(table, 200, 3)
    assert floor["n_units"] == len(lines) and floor["n_sdr_defined"] == sum(int(c["sdr_n"]) for c in every)
    assert floor["metrics"]["SDR"] == round(sum(c["sdr"] for c in every) / sum(c["sdr_n"] for c in every), 6)
