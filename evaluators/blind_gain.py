"""MMStar's multimodal gain and leakage from score dirs of one dataset (`mmfaith report`), for any family.

Definitions (Chen et al. 2024, "Are We on the Right Way for Evaluating Large Vision-Language
Models?", section 4: MG = S_v - S_wv, ML = max(0, S_wv - S_t); here without the clamp, as a
signed difference with its interval):
- multimodal_gain of a model: its score with the images minus its score on the same probes asked
  with `mmfaith run --no-image` (two score dirs of one model, one with provenance.no_image true);
- leakage of a model: its no-image score minus the `prior` reference model's (a score dir whose
  model is named `prior`: it answers from the question's template alone, evaluators/prior_model.py).
Each is paired per scored item (the items both score dirs scored, matched by their key: the score
dirs' items folded by the family's `scored_items.ItemFold`) with a 95% paired bootstrap interval
clustered by source image (stats.paired_bootstrap), overall and per template (the fold's label
`BlindMeasure.template`): a gain near 0 says the images did not matter; a leakage above 0
says the model knows answers the question's wording alone does not give away (memorised items).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfaith.evaluators.report_tables import fmt_ci, md_table
from mmfaith.evaluators.scored_items import ScoredItems, match, paired
from mmfaith.evaluators.stats import Statistic

PRIOR_MODEL = "prior"
Loaded = tuple[dict[str, Any], ScoredItems]


def _is_blind(metrics: Mapping[str, Any]) -> bool:
    return bool(metrics["provenance"].get("no_image"))


@dataclass(frozen=True)
class BlindMeasure:
    """How a family's folded items (`scored_items.ScoredItems`, paired by their key and clustered by source image)
    are summed (`statistic`) and grouped (`template`: the label naming the item's template)."""

    statistic: Statistic
    template: str = "template"
    scored: str | None = None
    """The number saying which items the statistic is defined on (SPD-Faith: the pairs with a difference, not the
    controls); None: every item."""


def _paired(a: ScoredItems, b: ScoredItems, how: BlindMeasure, keys: Sequence[str], n: int,
            seed: int) -> dict[str, Any]:
    pos_a, pos_b = match(a, b, use_a=how.scored)

    def block(chosen: np.ndarray) -> dict[str, Any]:
        result = paired(a, b, pos_a[chosen], pos_b[chosen], how.statistic, n, seed)
        return {"n_items": int(chosen.size), **{key: {
            "difference": None if result[key][0] is None else round(result[key][0], 6),
            "ci95": None if result[key][1] is None else [round(v, 6) for v in result[key][1]]} for key in keys}}

    labels = a.labels[how.template]
    shared = [labels[p] for p in pos_a.tolist()]
    return {"overall": block(np.arange(len(shared))) if shared else None,
            "by_template": {t: block(np.flatnonzero([label == t for label in shared])) for t in sorted(set(shared))}}


def gain_and_leakage(loaded: Sequence[Loaded], labels: Sequence[str], how: BlindMeasure, keys: Sequence[str],
                     n: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """comparison.json's `multimodal_gain` and `leakage` (module docstring): one entry per model with both a
    with-image and a no-image score dir (gain), and per no-image score dir when a `prior` score dir is given."""
    models = [m["provenance"]["model"] for m, _ in loaded]
    prior = next((k for k, (m, _) in enumerate(loaded) if models[k] == PRIOR_MODEL and not _is_blind(m)), None)
    gains, leaks = [], []
    for k, (metrics, items) in enumerate(loaded):
        if not _is_blind(metrics):
            continue
        seen = next((j for j, (m, _) in enumerate(loaded) if models[j] == models[k] and not _is_blind(m)), None)
        if seen is not None:
            gains.append({"model": models[k], "with_image": labels[seen], "without_image": labels[k],
                          **_paired(loaded[seen][1], items, how, keys, n, seed)})
        if prior is not None:
            leaks.append({"model": models[k], "without_image": labels[k], "prior": labels[prior],
                          **_paired(items, loaded[prior][1], how, keys, n, seed)})
    return {"multimodal_gain": gains, "leakage": leaks}


UNDEFINED = "undefined for one of the two runs on these items"
"""Why a gain or leakage is n/a: the metric has no value for one side on the items compared."""


def blind_report_lines(blind: Mapping[str, list[dict[str, Any]]], keys: Sequence[str]) -> list[str]:
    """The report's section on multimodal gain and leakage (empty when neither could be computed)."""
    lines: list[str] = []
    for name, title, a, b in (("multimodal_gain", "Multimodal gain (with image - without, MMStar)", "with_image",
                               "without_image"),
                              ("leakage", "Leakage (without image - the prior model, MMStar)", "without_image",
                               "prior")):
        for entry in blind.get(name, []):
            if entry["overall"] is None:
                continue
            rows = [["all", str(entry["overall"]["n_items"]),
                     *(fmt_ci(entry["overall"][k]["difference"], entry["overall"][k]["ci95"], UNDEFINED) for k in keys)]]
            rows += [[t, str(block["n_items"]),
                      *(fmt_ci(block[k]["difference"], block[k]["ci95"], UNDEFINED) for k in keys)]
                     for t, block in entry["by_template"].items()]
            lines += [f"## {title}: {entry['model']}", "",
                      f"`{entry[a]}` minus `{entry[b]}`, paired per item, 95% bootstrap CI clustered by source "
                      "image.", "",
                      *md_table(["template", "items", *keys], rows), ""]
    return lines
