"""CircularEval (MMBench, Liu et al. 2024, section 3.1) and answer-position bias, for any family's
multiple-choice probes.

Contract
--------
- Rotation k of n options keeps the labels (A, B, C, ...) in place and moves the texts: the option
  shown under label i is the original option (i + k) mod n, so the gold's letter moves with every
  rotation. Rotation 0 is the original order: its probe keeps its plain name and is the first-order
  answer; rotation k > 0 is asked as probe `"{probe}@r{k}"` (`rotated_probe`), with `rotation`: k
  in its prediction line's meta.
- `rotate_options(options, k)` gives the options as shown; `original_label(options, k, label)`
  maps a label read from rotation k's answer back to the option's label in the original order
  (None for None or an unknown label), so every rotation is scored against the one gold.
- `circular_correct(rights)`: an item is right under CircularEval when it is right in EVERY
  rotation (False as soon as one rotation is wrong, unparsed or missing).
- `position_bias(answers, golds, labels)`: each letter's share among the model's parsed first-order
  answers beside its share among the golds; a model that always answers "A" shows 1.0 for A
  whatever the golds. `options_position_bias(records, picks)`: the same over a dataset's
  multiple-choice records (those with options; the labels are all their options' labels) and one
  picked label per such record, in order (a label that is none of them counts as unparsed).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mmfaith.evaluators.report_tables import md_table

SEPARATOR = "@r"


def rotated_probe(probe: str, k: int) -> str:
    """The probe name of rotation k (rotation 0: the plain name)."""
    return probe if k == 0 else f"{probe}{SEPARATOR}{k}"


def rotations(options: Sequence[Any], circular: bool) -> range:
    """The rotations an item is asked: every one of its options' with `circular`, else only 0."""
    return range(len(options)) if circular and len(options) > 1 else range(1)


def rotate_options(options: Sequence[Mapping[str, Any]], k: int) -> list[dict[str, Any]]:
    """The options as rotation k shows them (module docstring)."""
    n = len(options)
    return [{**options[(i + k) % n], "label": options[i]["label"]} for i in range(n)]


def original_label(options: Sequence[Mapping[str, Any]], k: int, label: str | None) -> str | None:
    """The original label of the option a rotation-k answer named."""
    labels = [option["label"] for option in options]
    if label not in labels:
        return None
    return labels[(labels.index(label) + k) % len(labels)]


def shown_label(options: Sequence[Mapping[str, Any]], k: int, label: str) -> str:
    """The label under which rotation k shows the option whose original label is `label`."""
    labels = [option["label"] for option in options]
    return labels[(labels.index(label) - k) % len(labels)]


def circular_correct(rights: Iterable[bool | None]) -> bool:
    """Right in every rotation (a missing or unparsed rotation counts as wrong)."""
    rights = list(rights)
    return bool(rights) and all(right is True for right in rights)


def position_bias(answers: Iterable[str | None], golds: Iterable[str], labels: Sequence[str]) -> dict[str, Any]:
    """{letter: {"answered": share among parsed answers, "gold": share among golds}, "n_answers", "n_golds"}."""
    answers = [answer for answer in answers if answer is not None]
    golds = list(golds)
    shares: dict[str, Any] = {
        label: {"answered": round(answers.count(label) / len(answers), 6) if answers else None,
                "gold": round(golds.count(label) / len(golds), 6) if golds else None} for label in labels}
    return {"letters": shares, "n_answers": len(answers), "n_golds": len(golds)}


def options_position_bias(records: Iterable[Mapping[str, Any]], picks: Sequence[str | None]) -> dict[str, Any]:
    """`position_bias` of `picks` (one first-order answer per record with options, in order) over the records
    with options, against their golds (`answer`), on every label their options use (module docstring)."""
    chosen = [record for record in records if record["options"]]
    if len(chosen) != len(picks):
        raise ValueError(f"{len(picks)} picked answers for {len(chosen)} multiple-choice records")
    return labelled_position_bias(picks, [record["answer"] for record in chosen],
                                  {option["label"] for record in chosen for option in record["options"]})


def labelled_position_bias(picks: Sequence[str | None], golds: Sequence[str], labels: Iterable[str]) -> dict[str, Any]:
    """`options_position_bias` from its parts (a scorer that reads its records a chunk at a time keeps these): the
    picks, the golds and every label the records' options use; a pick that is no label counts as unread."""
    labels = sorted(labels)
    return position_bias([pick if pick in labels else None for pick in picks], golds, labels)


def controls_lines(labels: Sequence[str], metrics: Sequence[Mapping[str, Any]]) -> list[str]:
    """A report's sections on CircularEval (metrics.json's `circular`) and answer-position bias (`position_bias`)
    for one or several models; a model scored without `--circular` reads "not asked", and a family whose
    metrics have no `circular` key at all (it cannot rotate) gets no CircularEval section."""
    rows = []
    for label, m in zip(labels, metrics):
        if "circular" not in m:
            continue
        block = m.get("circular")
        if not block:
            rows.append([label, "-", "-", "not asked (run --circular)", "-"])
        for probe, values in (block or {}).items():
            rows.append([label, probe, str(values["n_items"]), _share(values["accuracy"]),
                         _share(values["accuracy_circular"])])
    lines = ["## CircularEval (MMBench): right in every rotation of the options", "",
             *md_table(["model", "probe", "items", "accuracy (first order)", "accuracy_circular"], rows),
             ""] if rows else []
    biased = [(label, m["position_bias"]) for label, m in zip(labels, metrics) if m.get("position_bias")]
    if biased:
        letters = list(dict.fromkeys(letter for _, bias in biased for letter in bias["letters"]))
        lines += ["## Answer-position bias: each letter's share of the answers (the golds' share)", "",
                  *md_table(["model", "answers", *letters], [
                      [label, str(bias["n_answers"]),
                       *(f"{_share((bias['letters'].get(x) or {}).get('answered'))} "
                         f"({_share((bias['letters'].get(x) or {}).get('gold'))})" for x in letters)]
                      for label, bias in biased]), ""]
    return lines


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
