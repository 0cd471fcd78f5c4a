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
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def _scored_block(n_items: int, sums: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Every metric of a group of `n_items` items with differences from their summed components (n_items 0:
    every rate null)."""
    if not n_items:
        return {"n_items": 0, **{name: None for name in CI_METRICS},
                "TF1_by_type": {t: {"precision": None, "recall": None, "f1": None} for t in CLAIM_TYPES},
                "DRF_errors": {name: 0 for name in DRF_ERRORS}, "n_left_out": {metric: 0 for metric in LEFT_OUT}}
    block: dict[str, Any] = {"n_items": n_items}
    block.update({name: _scalar(value) for name, value in headline_from_sums(sums).items()})
    block["TF1_by_type"] = {t: {k: _scalar(v) for k, v in _f1(sums[f"tp_{t}"], sums[f"claims_{t}"],
                                                               sums[f"gold_{t}"]).items()} for t in CLAIM_TYPES}
    block["DRF_errors"] = {name: int(sums[f"drf_{name}"][0]) for name in DRF_ERRORS}
    block["n_left_out"] = {metric: n_items - int(sums[f"{key}_n"][0]) for metric, key in LEFT_OUT.items()}
    return block


def control_from_sums(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The control-pair rates, vectorised (module docstring)."""
    return {key: _ratio(sums[key], sums[f"{key}_n"]) for key in ("false_alarm", *(f"fa_{p}" for p in ALARM_PROBES))}


def _control_block(n_items: int, sums: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """False-alarm rates of `n_items` control items from their summed components."""
    if not n_items:
        return {"n_items": 0, "false_alarm_rate": None, "false_alarm_by_probe": {p: None for p in ALARM_PROBES},
                "n_left_out": 0}
    rates = {key: _scalar(value) for key, value in control_from_sums(sums).items()}
    return {"n_items": n_items, "false_alarm_rate": rates["false_alarm"],
            "false_alarm_by_probe": {p: rates[f"fa_{p}"] for p in ALARM_PROBES},
            "n_left_out": n_items - int(sums["false_alarm_n"][0])}


def _interval(bounds: tuple[float, float] | None) -> list[float] | None:
    return None if bounds is None else [round(bounds[0], _DECIMALS), round(bounds[1], _DECIMALS)]


def _ci(table: stats.Components, statistic: stats.Statistic, n_bootstrap: int,
        seed: int) -> dict[str, list[float] | None]:
    """Cluster-bootstrap 95% intervals of a statistic's metrics over a table of items' components."""
    bounds = stats.bootstrap_ci(table, None, statistic, n_bootstrap, seed)
    return {name: _interval(value) for name, value in sorted(bounds.items())}


def _sums(table: stats.Components) -> dict[str, np.ndarray]:
    """Each key's sum over the table's items, added one item after the other in item order: the floats the items'
    component dicts give summed one by one (a running sum, not numpy's pairwise one)."""
    return {key: np.cumsum(table.column(key))[-1:] for key in table.keys()}


_CONTROL = -1
"""The group code of a control pair (`Summary`); a scored pair's is its GROUPS index (len(GROUPS): none of them)."""
_GROUP_CODES = {group: code for code, group in enumerate(GROUPS)}
_FRACTIONAL = frozenset({"DS", "consistency", "DRF"})
"""The components that may be fractions; every other is a count or a 0/1 flag, held as a small integer."""
_PART_ITEMS = 4096
"""Items folded into one `_Part` (a score's chunk is one)."""


def _fraction_columns(layout: tuple[str, ...]) -> list[int]:
    """The columns of a layout that hold `_FRACTIONAL` components."""
    return [k for k, key in enumerate(layout) if key in _FRACTIONAL]


@dataclass(frozen=True)
class _Rows:
    """Items of one kind (scored or control) in a `_Part`, in order: their components' whole numbers (columns
    `whole` of the layout) in the smallest integer type that holds them, and their fractions (columns `fraction`)."""

    whole: np.ndarray
    fraction: np.ndarray


@dataclass(frozen=True)
class _Part:
    """Up to `_PART_ITEMS` items folded, in order: each one's group code (_CONTROL, or its GROUPS index) and cluster
    number, and the scored and control items' components (`_Rows`)."""

    groups: np.ndarray
    clusters: np.ndarray
    rows: dict[bool, _Rows]
    """scored (True) or control (False) -> their rows."""


class Summary:
    """metrics.json's summary folded pair by pair (`add`, items.jsonl's order; `extend` by another fold, e.g. a
    chunk's folded on a worker process): per pair a group code, a cluster number and its `item_components` as
    small integers (float64 only for the `_FRACTIONAL` ones), tens of bytes a pair, and the answer counts.
    `result` is what `summarize` gives of the same items: each block's components made into a `stats.Components`
    table one block at a time (the same keys, values and item order as a table of the items' dicts, so the same
    sums and bootstrap numbers), then dropped."""

    def __init__(self) -> None:
        self.clusters: dict[str, int] = {}
        self.layouts: dict[bool, tuple[str, ...]] = {}
        """scored (True) or control (False) -> the keys of their components, in order."""
        self.answer_counts = {f"n_{status}": dict.fromkeys(PROBES, 0) for status in STATUSES[1:]}
        self._parts: list[_Part] = []
        self._groups: list[int] = []
        self._clusters: list[int] = []
        self._values: dict[bool, list[Any]] = {True: [], False: []}

    @classmethod
    def of(cls, items: Iterable[Mapping[str, Any]]) -> Summary:
        """`items` folded (and packed: what a worker process sends back)."""
        summary = cls()
        for item in items:
            summary.add(item)
        summary._pack()
        return summary

    def add(self, item: Mapping[str, Any]) -> None:
        """The next item of items.jsonl (`score_item`, or the fields of it `item_components` reads and its group,
        cluster and answers)."""
        parts = item_components(item)
        scored = item["num_differences"] > 0
        keys = tuple(parts)
        layout = self.layouts.setdefault(scored, keys)
        if keys != layout:
            raise ValueError(f"item {item['id']}: components {keys} are not those of the items before {layout}")
        self._groups.append(_GROUP_CODES.get(item["group"], len(GROUPS)) if scored else _CONTROL)
        self._clusters.append(self.clusters.setdefault(item["cluster"], len(self.clusters)))
        self._values[scored].append(tuple(parts.values()))
        answers = item["answers"]
        for probe in PROBES:
            counts = self.answer_counts.get(f"n_{answers[probe]['status']}")
            if counts is not None:
                counts[probe] += 1
        if len(self._groups) == _PART_ITEMS:
            self._pack()

    def extend(self, other: Summary) -> None:
        """The items `other` folded, after this one's."""
        for scored, layout in other.layouts.items():
            if self.layouts.setdefault(scored, layout) != layout:
                raise ValueError(f"components {layout} are not those of the items before {self.layouts[scored]}")
        self._pack()
        other._pack()
        numbers = np.array([self.clusters.setdefault(name, len(self.clusters)) for name in other.clusters],
                           dtype=np.int32)
        self._parts.extend(_Part(part.groups, numbers[part.clusters], part.rows) for part in other._parts)
        for status, counts in other.answer_counts.items():
            for probe, count in counts.items():
                self.answer_counts[status][probe] += count

    def _pack(self) -> None:
        """The items added since the last `_pack` as one `_Part`."""
        if not self._groups:
            return
        rows = {}
        for scored, values in self._values.items():
            if values:
                matrix = np.array(values, dtype=np.float64)
                fraction = _fraction_columns(self.layouts[scored])
                whole = np.delete(matrix, fraction, axis=1)
                numbers = whole.astype(np.int64)
                if not np.array_equal(numbers, whole):
                    raise ValueError(f"components {self.layouts[scored]}: a fraction outside {sorted(_FRACTIONAL)}")
                smallest = np.result_type(np.min_scalar_type(numbers.min(initial=0)),
                                          np.min_scalar_type(numbers.max(initial=0)))
                rows[scored] = _Rows(numbers.astype(smallest), matrix[:, fraction])
        self._parts.append(_Part(np.array(self._groups, dtype=np.int8), np.array(self._clusters, dtype=np.int32),
                                 rows))
        self._groups, self._clusters, self._values = [], [], {True: [], False: []}

    def _table(self, chosen: Callable[[np.ndarray], np.ndarray]) -> stats.Components:
        """The components of the items whose group code `chosen` keeps (a mask of the codes), in item order."""
        self._pack()
        names = list(self.clusters)
        table = stats.Components()
        for part in self._parts:
            for scored, rows in part.rows.items():
                layout = self.layouts[scored]
                kind = part.groups >= 0 if scored else part.groups == _CONTROL
                keep = chosen(part.groups[kind])
                if not keep.any():
                    continue
                fraction = _fraction_columns(layout)
                values = np.empty((int(keep.sum()), len(layout)))
                values[:, fraction] = rows.fraction[keep]
                values[:, np.setdiff1d(np.arange(len(layout)), fraction)] = rows.whole[keep]
                table.add_rows(layout, values, [names[k] for k in part.clusters[kind][keep].tolist()])
        return table

    def _measured(self, chosen: Callable[[np.ndarray], np.ndarray], statistic: stats.Statistic | None,
                  n_bootstrap: int, seed: int) -> tuple[int, dict[str, np.ndarray], dict[str, list[float] | None]]:
        """(how many, summed components, bootstrap intervals of `statistic`; None: none) of the items `chosen`
        keeps: their table is made here and dropped on return, so one block's is held at a time."""
        table = self._table(chosen)
        return table.n, _sums(table), {} if statistic is None else _ci(table, statistic, n_bootstrap, seed)

    def result(self, n_bootstrap: int, seed: int) -> dict[str, Any]:
        """overall, by_difficulty (each with its ci95), ci95 of overall, control, the headline beside DS and DQR
        (over every item), and the counts."""
        n_scored, sums, ci95 = self._measured(lambda codes: codes >= 0, headline_from_sums, n_bootstrap, seed)
        overall = _scored_block(n_scored, sums)
        by_difficulty = {}
        for code, group in enumerate(GROUPS):
            n_group, sums, ci = self._measured(lambda codes, code=code: codes == code, headline_from_sums,
                                               n_bootstrap, seed)
            by_difficulty[group] = {**_scored_block(n_group, sums), "ci95": ci}
        n_control, sums, _ = self._measured(lambda codes: codes == _CONTROL, None, n_bootstrap, seed)
        control = _control_block(n_control, sums)
        n_items, sums, ci = self._measured(lambda codes: np.ones(codes.shape, dtype=bool), headline_beside_from_sums,
                                           n_bootstrap, seed)
        headline: dict[str, Any] = {name: _scalar(value) for name, value in headline_beside_from_sums(sums).items()}
        headline["ci95"] = ci
        return {"overall": overall, "ci95": ci95, "by_difficulty": by_difficulty, "control": control,
                "headline": headline,
                "counts": {"n_items": n_items, "n_scored": n_scored, "n_control": n_items - n_scored,
                           **self.answer_counts}}


def summarize(items: Iterable[Mapping[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """overall, by_difficulty (each with its ci95), ci95 of overall, control, headline and the answer counts of
    `items` (`Summary` folded over them)."""
    return Summary.of(items).result(n_bootstrap, seed)
