"""SPD-Faith metrics: one item's scores (with the matches behind them) and their aggregates.

Definitions (fixed by the project, issue 3; paper sections 3.2 and appendix B.2):

Answers (spd_faith/parse.py): the last \\boxed{}; without one, the last yes/no word or number of the final
sentence; otherwise unparsed. A response cut by the token limit (finish_reason "length") has
status `truncated` (counted apart from `unparsed`, scored on whatever it parses to); a probe with
no answer has status `missing` and is scored like an unparsed one. A `describe` response without
a JSON list is `unparsed` (its claims are then read from the text).

Global perception (B.2.1), from the `count` probe, p = parsed count, g = true count (items with
g >= 1): DQR = 1[p = g]; DS = max(0, 1 - |p - g| / g); existence_rate = 1[p > 0]. Unparsed p
scores 0 on all three. Averaged over items. (The paper's prose calls DS the "success rate of
identifying the existence of any difference"; mmfaith reports that as existence_rate and keeps
DS as the tolerance score of its equation 9.)

Faithful perception (B.2.2), from the `describe` claims: per item and type t, tp_t = min(#claims
of t, #gold of t) (TF1); CF1 the same with categories (multiset intersection; `other` never
matches). Micro precision = sum tp / sum claims (0 when there are no claims), recall = sum tp /
sum gold, F1 = 2PR / (P + R) (0 when P + R = 0). TF1_by_type: the same per type (recall and F1
null for a type with no gold; precision too when the type has no claims either).

Faithful reasoning (B.2.3):
- contradiction_rate: share of items whose `same` and `different` answers are both yes or both
  no; items where either is unparsed or missing are left out (and counted).
- consistency_ratio: the claims of `same` and `different` paired one to one by the judge's labels
  (a maximum matching of `consistent` pairs first, then of `contradictory` ones, so a repeated
  category pairs by type first); +1 per consistent pair, -1 per contradictory pair, +0.5 per claim
  only one response makes, divided by the claims counted (a pair once). Per item, averaged over
  items; items where a response is missing, or neither claims anything, are left out (counted);
  null when none is left.
- DRF: describe claims matched one to one to the gold differences, one maximum matching per class
  in this order against what is still unmatched: faithful, attribute_error, type_confusion,
  type_category_mismatch; of the claims left, min(left, claims - g) are quantity_error and the
  rest fabrication. A claim's color is compared with the color of the second picture the model
  saw (color_after; color_before for a color change shown edited-first, meta.order).
  DRF = faithful / K per item, K the model's self-reported count (the `count` probe's answer, which
  the describe prompt repeats: "There are K differences ... Can you find them?"), or the number of
  claims listed when that is larger (so DRF <= 1), as the paper's appendix says: "Given a model
  response containing K claims (where K is the model's self-reported count) ... DRF measures the
  proportion of reasoning steps that are factually correct" and fabrication is "inventing
  non-existent differences to fill the self-reported count" (docs/spd_faith_metrics.md#drf). A
  model that says "5 differences" and lists one right claim scores 1/5, not 1. Averaged over items
  whose describe answer exists and whose K >= 1; DRF_coverage = share of items where it is defined.
- yes_ratio_same: share of parsed `same` answers that are yes (appendix C.1, Figure 11).

Control pairs (no difference; mmfaith's addition): a control item is a false alarm when any of
its parsed answers reports a difference: `different` yes, `same` no, or `count` > 0.
false_alarm_rate = false alarms / control items with at least one of those three parsed;
false_alarm_by_probe gives each probe's share among its parsed answers.

Headline beside DS and DQR (issue 27; `summarize`'s `headline`, each with a cluster-bootstrap
95% interval): every scored pair differs, so "same?" alone has gold "no" on most probes and a model
that always reports a difference would look perfect on it. `same_different_balanced_accuracy` is
the mean of the same/different answers' accuracy on differing pairs (different yes, same no) and
on control pairs (different no, same yes), each over the parsed answers of its kind: a model that
always says "different" scores 0.5. `false_alarm_rate` is the control rate above, with its
interval. They are reported beside DS and DQR rather than folded into them: the paper defines DS
and DQR only on pairs with g >= 1 differences (appendix B.2.1, eq. 8-9; DS divides by g), and its
benchmark has no control pairs, so a penalty would change its numbers' meaning; the balanced
accuracy and the false-alarm rate tell what DS and DQR cannot.

Every aggregate is a function of sums of per-item components (`item_components`), so bootstrap
replicates (stats.py) recompute them exactly as the point estimate does.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfaith.evaluators import stats
from mmfaith.evaluators.spd_faith.claims import (CLAIM_PROBES, CLAIM_TYPES, CONSISTENCY_LABELS, DRF_LABELS, OTHER, Claim,
                                           Judgement, JudgeCase, gold_claims)
from mmfaith.evaluators.answers import read_count, read_yes_no
from mmfaith.evaluators.spd_faith.parse import parse_claims
from mmfaith.evaluators.spd_faith.prompts import PROBES

DEFINITIONS_VERSION = "spd-faith-metrics/1"
GROUPS = ("easy", "medium", "hard", "multi")
DRF_CLASSES = (*DRF_LABELS, "quantity_error", "fabrication")
DRF_ERRORS = DRF_CLASSES[1:]
CI_METRICS = ("DS", "DQR", "existence_rate", "TF1", "CF1", "contradiction_rate", "consistency_ratio", "DRF",
              "DRF_coverage", "yes_ratio_same")
STATUSES = ("ok", "unparsed", "truncated", "missing")
ALARM_PROBES = ("same", "different", "count")
LEFT_OUT = {"contradiction_rate": "contradiction", "consistency_ratio": "consistency", "DRF": "DRF",
            "yes_ratio_same": "yes_same"}
"""Metrics undefined for some items, and the item score whose null leaves the item out."""
SUMMARY_FIELDS = ("id", "num_differences", "group", "cluster", "answers", "scores", "type_counts", "drf.classes",
                  "category_tp")
"""What `summarize`, the answer tally and a comparison read of an items.jsonl line (score and report keep only
these: evaluators/score_dir.py); the claims, gold and matches behind them are most of a line."""
_DECIMALS = 6


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to one probe: its text (None: no answer), whether the token limit cut it, and the
    order the pictures were shown in (meta.order: original-first, edited-first, or None: unknown,
    taken as original-first). Slotted: a score holds one per prediction line (400,000 at 100,000 pairs)."""

    response: str | None
    truncated: bool = False
    order: str | None = None


def read_answer(probe: str, answer: Answer, listed: bool | None = None) -> dict[str, Any]:
    """{"status", "value", "order"}: value is yes (True) / no (False) or the count; None for describe or unparsed.
    `listed`: for describe, whether the response holds a JSON list of claims when already read (JudgeCase.listed);
    None: read here."""
    if answer.response is None:
        return {"status": "missing", "value": None, "order": None}
    if probe == "describe":
        value, parsed = None, parse_claims(answer.response) is not None if listed is None else listed
    else:
        value = read_count(answer.response) if probe == "count" else read_yes_no(answer.response, probe)
        parsed = value is not None
    status = "truncated" if answer.truncated else "ok" if parsed else "unparsed"
    return {"status": status, "value": value, "order": answer.order}


def maximum_matching(edges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """A maximum one-to-one matching of a bipartite graph (Kuhn's augmenting paths, deterministic order)."""
    neighbours: dict[int, list[int]] = {}
    for left, right in sorted(set(edges)):
        neighbours.setdefault(left, []).append(right)
    owner: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in neighbours[left]:
            if right not in seen:
                seen.add(right)
                if right not in owner or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    for left in neighbours:
        augment(left, set())
    return sorted((left, right) for right, left in owner.items())


def match_by_label(labels: list[list[str]], passes: Sequence[str]) -> list[tuple[int, int, str]]:
    """One maximum matching per label, in order, each over the rows and columns still unmatched."""
    matched: list[tuple[int, int, str]] = []
    rows: set[int] = set()
    cols: set[int] = set()
    present = {value for row in labels for value in row}
    for label in (label for label in passes if label in present):  # a label no cell holds matches nothing
        edges = [(i, j) for i, row in enumerate(labels) for j, value in enumerate(row)
                 if value == label and i not in rows and j not in cols]
        for i, j in maximum_matching(edges):
            matched.append((i, j, label))
            rows.add(i)
            cols.add(j)
    return matched


def count_scores(p: int | None, g: int) -> dict[str, float]:
    """DS, DQR and existence of one item (g >= 1); an unparsed count scores 0 on each."""
    if p is None:
        return {"DS": 0.0, "DQR": 0.0, "existence": 0.0}
    return {"DS": max(0.0, 1.0 - abs(p - g) / g), "DQR": float(p == g), "existence": float(p > 0)}


def drf_breakdown(labels: list[list[str]], n_claims: int, n_gold: int) -> dict[str, Any]:
    """Class counts and matches of one item's describe claims against its gold (module docstring)."""
    matches = match_by_label(labels, DRF_LABELS)
    classes = Counter(label for _, _, label in matches)
    left = n_claims - len(matches)
    classes["quantity_error"] = min(left, max(0, n_claims - n_gold))
    classes["fabrication"] = left - classes["quantity_error"]
    matched = {i for i, _, _ in matches}
    return {"classes": {name: classes[name] for name in DRF_CLASSES},
            "matches": [{"claim": i, "gold": j, "label": label} for i, j, label in matches],
            "unmatched_claims": [i for i in range(n_claims) if i not in matched]}


def consistency_breakdown(labels: list[list[str]], n_same: int, n_different: int) -> dict[str, Any]:
    """The consistency ratio of one item and its pairs (module docstring); ratio None without claims."""
    matches = match_by_label(labels, CONSISTENCY_LABELS)
    unpaired = n_same + n_different - 2 * len(matches)
    counted = len(matches) + unpaired
    total = sum(1.0 if label == "consistent" else -1.0 for _, _, label in matches) + 0.5 * unpaired
    return {"ratio": total / counted if counted else None,
            "pairs": [{"same": i, "different": j, "label": label} for i, j, label in matches]}


def _by_type(claims: list[Claim]) -> dict[str, int]:
    counts = dict.fromkeys((*CLAIM_TYPES, OTHER), 0)
    for claim in claims:
        if claim.type in counts:
            counts[claim.type] += 1
    return counts


def _category_tp(claims: list[Claim], gold: list[Claim]) -> int:
    if not claims or not gold:
        return 0
    found = Counter(c.category for c in claims if c.category != OTHER)
    return sum((found & Counter(g.category for g in gold)).values())


def control_alarms(value: Mapping[str, Any]) -> dict[str, bool | None]:
    """Per probe, whether the answer reports a difference (same no, different yes, count > 0); None if unparsed."""
    return {"same": None if value["same"] is None else not value["same"], "different": value["different"],
            "count": None if value["count"] is None else value["count"] > 0}


def group_of(record: dict[str, Any]) -> str:
    """easy | medium | hard (single), multi, or control."""
    return record["difficulty"] if record["subset"] == "single" else record["subset"]


def judge_case(record: dict[str, Any], answers: Mapping[str, Answer]) -> JudgeCase:
    """What a judge reads for one pair: the claiming probes' responses and the gold as the describe answer saw it."""
    return JudgeCase({probe: answers[probe].response for probe in CLAIM_PROBES},
                     gold_claims(record, edited_first=answers["describe"].order == "edited-first"),
                     [d["description"] for d in record["differences"]])


def score_item(record: dict[str, Any], cluster: str, answers: Mapping[str, Answer], case: JudgeCase,
               judgement: Judgement) -> dict[str, Any]:
    """The items.jsonl record of one pair: answers, claims, gold, per-item scores and the matches behind them
    (`case`: the pair's `judge_case`, whose gold the judgement was made against)."""
    read = {probe: read_answer(probe, answers[probe], case.listed["describe"] is not None if probe == "describe"
                               else None) for probe in PROBES}
    value = {probe: read[probe]["value"] for probe in PROBES}
    gold = case.gold
    describe = judgement.claims["describe"]
    g = record["num_differences"]
    drf = drf_breakdown(judgement.drf, len(describe), g)
    consistency = consistency_breakdown(judgement.consistency, len(judgement.claims["same"]),
                                        len(judgement.claims["different"]))
    both_parsed = value["same"] is not None and value["different"] is not None
    both_present = read["same"]["status"] != "missing" and read["different"]["status"] != "missing"
    claimed, gold_types = _by_type(describe), _by_type(gold)
    scores: dict[str, Any] = {"DS": None, "DQR": None, "existence": None, "contradiction": None,
                              "consistency": None, "DRF": None, "yes_same": value["same"], "false_alarm": None}
    if g >= 1:
        scores.update(count_scores(value["count"], g))
        scores["contradiction"] = (value["same"] == value["different"]) if both_parsed else None
        scores["consistency"] = consistency["ratio"] if both_present else None
        drf["denominator"] = max(value["count"] or 0, len(describe))  # K, the self-reported count (docstring)
        answered = read["describe"]["status"] != "missing"
        scores["DRF"] = drf["classes"]["faithful"] / drf["denominator"] if answered and drf["denominator"] else None
    else:
        alarms = [alarm for alarm in control_alarms(value).values() if alarm is not None]
        scores["false_alarm"] = any(alarms) if alarms else None
    return {
        "definitions_version": DEFINITIONS_VERSION, "id": record["id"], "subset": record["subset"],
        "difficulty": record["difficulty"], "group": group_of(record), "cluster": cluster, "num_differences": g,
        "answers": read,
        "claims": {probe: [c.as_dict() for c in claims] for probe, claims in judgement.claims.items()},
        "claims_source": dict(judgement.source),
        "gold": [c.as_dict() for c in gold],
        "scores": scores,
        "type_counts": {"claims": claimed, "gold": gold_types,
                        "tp": {t: min(claimed[t], gold_types[t]) for t in CLAIM_TYPES}},
        "category_tp": _category_tp(describe, gold),
        "drf": drf,
        "consistency": consistency,
    }


def _flag(value: Any) -> tuple[float, float]:
    """(numerator, denominator) of a rate over the items where the value is defined."""
    return (0.0, 0.0) if value is None else (float(value), 1.0)


_RATE_KEYS = {key: (key, f"{key}_n") for key in ("false_alarm", *(f"fa_{p}" for p in ALARM_PROBES), "contradiction",
                                                 "consistency", "DRF", "yes_same")}
_TYPE_KEYS = {t: (f"claims_{t}", f"gold_{t}", f"tp_{t}") for t in CLAIM_TYPES}
_DRF_KEYS = {name: f"drf_{name}" for name in DRF_CLASSES}
_SAME_DIFFERENT_KEYS = {differs: (f"sd_{kind}_right", f"sd_{kind}_n") for differs, kind in ((True, "diff"),
                                                                                             (False, "ctrl"))}
"""Component names made once: one string each, not one per item (a summary holds every item's components)."""


def item_components(item: Mapping[str, Any]) -> dict[str, float]:
    """The sums an item adds to its group's metrics (headline_from_sums, control_from_sums)."""
    scores, answers = item["scores"], item["answers"]
    if item["num_differences"] == 0:
        alarms = control_alarms({probe: answers[probe]["value"] for probe in ALARM_PROBES})
        parts = {"false_alarm": scores["false_alarm"], **{f"fa_{probe}": alarm for probe, alarm in alarms.items()}}
        return {**{name: v for key, value in parts.items() for name, v in zip(_RATE_KEYS[key], _flag(value))},
                **_same_different(answers, differs=False)}
    types, drf = item["type_counts"], item["drf"]["classes"]
    parts = {"contradiction": scores["contradiction"], "consistency": scores["consistency"], "DRF": scores["DRF"],
             "yes_same": scores["yes_same"]}
    components = {name: v for key, value in parts.items() for name, v in zip(_RATE_KEYS[key], _flag(value))}
    components.update({"n": 1.0, "DS": scores["DS"], "DQR": scores["DQR"], "existence": scores["existence"],
                       "claims": float(sum(types["claims"].values())), "gold": float(sum(types["gold"].values())),
                       "tp_type": float(sum(types["tp"].values())), "tp_category": float(item["category_tp"])})
    for t in CLAIM_TYPES:
        components.update(zip(_TYPE_KEYS[t], (types["claims"][t], types["gold"][t], types["tp"][t])))
    components.update({_DRF_KEYS[name]: float(count) for name, count in drf.items()})
    components.update(_same_different(answers, differs=True))
    return components


def _same_different(answers: Mapping[str, Any], differs: bool) -> dict[str, float]:
    """Right and parsed same/different answers of one item, under `sd_diff_*` or `sd_ctrl_*` (module docstring)."""
    expected = {"same": not differs, "different": differs}
    parsed = [answers[p]["value"] == expected[p] for p in expected if answers[p]["value"] is not None]
    return dict(zip(_SAME_DIFFERENT_KEYS[differs], (float(sum(parsed)), float(len(parsed)))))


def headline_beside_from_sums(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The balanced same/different accuracy and the false-alarm rate over all items (module docstring)."""
    zero = np.zeros(np.shape(next(iter(sums.values()))))

    def get(key: str) -> np.ndarray:  # a build may lack one kind of pair
        return np.asarray(sums[key], dtype=float) if key in sums else zero

    differing, control = _ratio(get("sd_diff_right"), get("sd_diff_n")), _ratio(get("sd_ctrl_right"), get("sd_ctrl_n"))
    return {"same_different_balanced_accuracy": (differing + control) / 2,
            "same_different_accuracy_differing": differing, "same_different_accuracy_control": control,
            "false_alarm_rate": _ratio(get("false_alarm"), get("false_alarm_n"))}


def headline_beside(items: Sequence[Mapping[str, Any]], n_bootstrap: int, seed: int,
                    components: Sequence[Mapping[str, float]] | None = None) -> dict[str, Any]:
    """`headline_beside_from_sums` over every item (differing and control), with cluster-bootstrap intervals
    (`components`: the items' `item_components` when already made)."""
    components = _components(items, components)
    block: dict[str, Any] = {name: _scalar(value)
                             for name, value in headline_beside_from_sums(_sums(components)).items()}
    bounds = stats.bootstrap_ci(components, [i["cluster"] for i in items], headline_beside_from_sums, n_bootstrap, seed)
    block["ci95"] = {name: _interval(value) for name, value in sorted(bounds.items())}
    return block


def _ratio(num: np.ndarray, den: np.ndarray, empty: float = np.nan) -> np.ndarray:
    """num / den elementwise, `empty` where den is 0."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    return np.divide(num, den, out=np.full(num.shape, empty), where=den > 0)


def _f1(tp: np.ndarray, claims: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
    """Micro precision (0 without claims), recall and F1; all undefined (NaN) where there is no gold."""
    precision, recall = _ratio(tp, claims, 0.0), _ratio(tp, gold)
    f1 = _ratio(2 * precision * recall, precision + recall, 0.0)
    undefined = np.isnan(recall)
    return {"precision": np.where(undefined & (np.asarray(claims) == 0), np.nan, precision), "recall": recall,
            "f1": np.where(undefined, np.nan, f1)}


def headline_from_sums(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The rate metrics of a group of scored items (CI_METRICS), vectorised over bootstrap replicates."""
    return {
        "DS": _ratio(sums["DS"], sums["n"]), "DQR": _ratio(sums["DQR"], sums["n"]),
        "existence_rate": _ratio(sums["existence"], sums["n"]),
        "TF1": _f1(sums["tp_type"], sums["claims"], sums["gold"])["f1"],
        "CF1": _f1(sums["tp_category"], sums["claims"], sums["gold"])["f1"],
        "contradiction_rate": _ratio(sums["contradiction"], sums["contradiction_n"]),
        "consistency_ratio": _ratio(sums["consistency"], sums["consistency_n"]),
        "DRF": _ratio(sums["DRF"], sums["DRF_n"]), "DRF_coverage": _ratio(sums["DRF_n"], sums["n"]),
        "yes_ratio_same": _ratio(sums["yes_same"], sums["yes_same_n"]),
    }


def _scalar(value: Any) -> float | None:
    value = float(np.asarray(value).reshape(-1)[0])
    return round(value, _DECIMALS) if np.isfinite(value) else None


def _components(items: Sequence[Mapping[str, Any]],
                components: Sequence[Mapping[str, float]] | None) -> Sequence[Mapping[str, float]]:
    """The items' `item_components`: `components` when given (made once by `summarize` for every block)."""
    return [item_components(item) for item in items] if components is None else components


def _sums(components: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
    total: dict[str, float] = {}
    for parts in components:  # Counter.update's sums (the same order and values) at a third of its cost
        if not total:
            total.update(parts)
            continue
        for key, value in parts.items():
            total[key] = value + total.get(key, 0)
    return {key: np.array([value]) for key, value in total.items()}


def _interval(bounds: tuple[float, float] | None) -> list[float] | None:
    return None if bounds is None else [round(bounds[0], _DECIMALS), round(bounds[1], _DECIMALS)]


def _ci(items: Sequence[Mapping[str, Any]], components: Sequence[Mapping[str, float]], n_bootstrap: int,
        seed: int) -> dict[str, list[float] | None]:
    """Cluster-bootstrap 95% intervals of the headline metrics of scored items (`components`: theirs)."""
    bounds = stats.bootstrap_ci(components, [i["cluster"] for i in items], headline_from_sums, n_bootstrap, seed)
    return {name: _interval(value) for name, value in sorted(bounds.items())}


def scored_block(items: Sequence[Mapping[str, Any]],
                 components: Sequence[Mapping[str, float]] | None = None) -> dict[str, Any]:
    """Every metric of a group of items with differences (n_items 0: every rate null; `components`: the items'
    `item_components` when already made)."""
    if not items:
        return {"n_items": 0, **{name: None for name in CI_METRICS},
                "TF1_by_type": {t: {"precision": None, "recall": None, "f1": None} for t in CLAIM_TYPES},
                "DRF_errors": {name: 0 for name in DRF_ERRORS}, "n_left_out": {metric: 0 for metric in LEFT_OUT}}
    sums = _sums(_components(items, components))
    block: dict[str, Any] = {"n_items": len(items)}
    block.update({name: _scalar(value) for name, value in headline_from_sums(sums).items()})
    block["TF1_by_type"] = {t: {k: _scalar(v) for k, v in _f1(sums[f"tp_{t}"], sums[f"claims_{t}"],
                                                               sums[f"gold_{t}"]).items()} for t in CLAIM_TYPES}
    block["DRF_errors"] = {name: int(sums[f"drf_{name}"][0]) for name in DRF_ERRORS}
    block["n_left_out"] = {metric: len(items) - int(sums[f"{key}_n"][0]) for metric, key in LEFT_OUT.items()}
    return block


def control_from_sums(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The control-pair rates, vectorised (module docstring)."""
    return {key: _ratio(sums[key], sums[f"{key}_n"]) for key in ("false_alarm", *(f"fa_{p}" for p in ALARM_PROBES))}


def control_block(items: Sequence[Mapping[str, Any]],
                  components: Sequence[Mapping[str, float]] | None = None) -> dict[str, Any]:
    """False-alarm rates of the control items (`components`: their `item_components` when already made)."""
    if not items:
        return {"n_items": 0, "false_alarm_rate": None, "false_alarm_by_probe": {p: None for p in ALARM_PROBES},
                "n_left_out": 0}
    sums = _sums(_components(items, components))
    rates = {key: _scalar(value) for key, value in control_from_sums(sums).items()}
    return {"n_items": len(items), "false_alarm_rate": rates["false_alarm"],
            "false_alarm_by_probe": {p: rates[f"fa_{p}"] for p in ALARM_PROBES},
            "n_left_out": len(items) - int(sums["false_alarm_n"][0])}


def answer_counts(items: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """n_unparsed, n_truncated and n_missing per probe over all items."""
    return {f"n_{status}": {probe: sum(item["answers"][probe]["status"] == status for item in items)
                            for probe in PROBES} for status in STATUSES[1:]}


def summarize(items: Sequence[Mapping[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """overall, by_difficulty (each with its ci95), ci95 of overall, control, and the answer counts."""
    components = [item_components(item) for item in items]  # made once, read by every block
    scored = [k for k, item in enumerate(items) if item["num_differences"] > 0]
    control = [k for k, item in enumerate(items) if item["num_differences"] == 0]

    def pick(ks: Sequence[int]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, float]]]:
        return [items[k] for k in ks], [components[k] for k in ks]

    by_group = {group: pick([k for k in scored if items[k]["group"] == group]) for group in GROUPS}
    return {
        "overall": scored_block(*pick(scored)),
        "ci95": _ci(*pick(scored), n_bootstrap, seed),
        "by_difficulty": {group: {**scored_block(*members), "ci95": _ci(*members, n_bootstrap, seed)}
                          for group, members in by_group.items()},
        "control": control_block(*pick(control)),
        "headline": headline_beside(items, n_bootstrap, seed, components),
        "counts": {"n_items": len(items), "n_scored": len(scored), "n_control": len(items) - len(scored),
                   **answer_counts(items)},
    }
