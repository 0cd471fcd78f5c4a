"""`mmfaith score vfaith`: validate predictions, read every answer, write the scores.

Inputs: a VFaith dataset (loaders/vfaith) and predictions.jsonl (schemas/prediction.schema.json;
also the submission format), read by the shared reader (evaluators/predictions.py: a submission
is validated as a whole; with `from_run` the last answered line of an (id, probe) wins; stale lines
that showed other images are refused or, with `drop_stale`, dropped and counted).

Answers are read by parse.py: multiple choice as an option label, perception as a set of labels,
free form as normalised text, compared with the gold's normalised text; where a free-form answer
differs after normalisation, `judge` (an LLM, `--judge MODEL`) decides, its verdicts cached under
the mmfaith cache dir; with the rule judge it counts as wrong. Unparsed and missing answers count as
wrong and are counted apart (metrics.py).

Outputs in the score dir (written whole through a staging folder; a non-empty --out that is not a
score of the same inputs is refused unless `overwrite`): metrics.json, items.jsonl (one line per
pair, then per perception item, in dataset order) and report.md. Same inputs, same bytes.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.answer_llm import ChoiceReader
from mmfaith.evaluators.answers import last_boxed, read_choice_set
from mmfaith.evaluators.circular import (SEPARATOR, circular_correct, original_label, position_bias,
                                         rotate_options, rotated_probe)
from mmfaith.evaluators.prediction_index import ItemTable
from mmfaith.evaluators.coverage import Tally, status_of
from mmfaith.evaluators.predictions import PredictionSet, read_predictions, shown_digest
from mmfaith.evaluators.score_settings import ScoreSettings
from mmfaith.evaluators.score_dir import ItemSpool, check_score_dir, publish_scores
from mmfaith.clients import ModelEndpoint
from mmfaith.evaluators.vfaith.judge import PROMPT_SHA256, FreeFormJudge
from mmfaith.evaluators.vfaith.metrics import (DEFINITIONS_VERSION, Summary, circular_fields, pair_scores,
                                               perception_scores)
from mmfaith.evaluators.vfaith.parse import normalize, parse_free
from mmfaith.evaluators.vfaith.prompts import PAIR_PROBES, TEMPLATES_SHA256
from mmfaith.evaluators.vfaith.report import write_score_report
from mmfaith.evaluators.vfaith.run import VfaithProbePlan, item_rotations, item_shows
from mmfaith.loaders.vfaith.dataset import (VfaithDataset, VfaithItem, VfaithPair, VfaithPerception,
                                            stream_vfaith_dataset)
from mmfaith.outdir import prepare_out_dir


SCORED_FIELDS = ("id", "pair_id", "category", "question", "question_type", "options", "answers", "answer_original",
                 "answer_edited", "image_sha256", "image_original_sha256", "image_edited_sha256", "source.dataset",
                 "source.file_name", "source.image_id")
"""What scoring reads of a pair or perception record (the loader keeps only these: mmfaith/records.py)."""
CHUNK_ITEMS = 4096
"""Items scored at a time: their records and answered lines are read, scored, written and dropped together."""


@dataclass(frozen=True, kw_only=True)
class ScoreRequest(ScoreSettings):
    """What to score and how (the flags of `mmfaith score vfaith`, one field each)."""

    dataset: Path
    judge: ModelEndpoint | None = None
    """None: the rule judge (normalised text only) for free-form answers; else an LLM (judge.py)."""
    reader: ModelEndpoint | None = None
    """An LLM that reads the multiple-choice replies the rules leave (evaluators/answer_llm.py)."""
    extract: str = "default"
    """The answer reader's rule (evaluators/answers.py): default, or paper (the last \\boxed{} only)."""


def _answer(pair: VfaithPair, response: str | None, reader: ChoiceReader, rotation: int = 0) -> str | None:
    """The gold-comparable form of a pair answer: an option label (in the original order, whichever rotation
    of the options was shown), or normalised free-form text."""
    record = pair.record
    if record["question_type"] == "multiple-choice":
        options = record["options"]
        return original_label(options, rotation, reader.choice(response, rotate_options(options, rotation)))
    return parse_free(response, reader.rule)


def circular_rights(pair: VfaithPair, predictions: PredictionSet, reader: ChoiceReader) -> dict[str, bool | None]:
    """probe -> right in every rotation of the options (CircularEval), None when the run asked no rotation of it."""
    record, result = pair.record, {}
    for probe in PAIR_PROBES:
        asked = item_rotations(pair, circular=True)
        lines = [predictions.answered.get((pair.id, rotated_probe(probe, k))) for k in asked]
        if len(asked) < 2 or all(line is None for line in lines[1:]):
            result[probe] = None
            continue
        gold = record[f"answer_{probe}"]
        result[probe] = circular_correct(line is not None and _answer(pair, line["response"], reader, k) == gold
                                         for k, line in zip(asked, lines))
    return result


def _gold(pair: VfaithPair, key: str) -> str:
    record = pair.record
    return record[key] if record["question_type"] == "multiple-choice" else normalize(record[key])


def score_items(dataset: VfaithDataset, predictions: PredictionSet, judge: FreeFormJudge, tally: Tally,
                reader: ChoiceReader) -> list[dict[str, Any]]:
    """items.jsonl: one line per pair, then per perception item (metrics.py); free-form answers through `judge`;
    every answer's status counted in `tally` (evaluators/coverage.py)."""
    items = []
    for pair in dataset.pairs:
        parsed, statuses = {}, {}
        for probe in PAIR_PROBES:
            line = predictions.answered.get((pair.id, probe))
            parsed[probe] = None if line is None else _answer(pair, line["response"], reader)
            statuses[probe] = tally.add(status_of(line, (pair.id, probe) in predictions.failed, parsed[probe]),
                                        None if line is None else last_boxed(line["response"]) is not None)
        gold = {"answer_original": _gold(pair, "answer_original"), "answer_edited": _gold(pair, "answer_edited")}
        if pair.record["question_type"] == "free-form":
            parsed = {probe: judge.resolve(pair.record["question"], value, gold["answer_edited"],
                                           gold["answer_original"]) for probe, value in parsed.items()}
        items.append({**pair_scores({**pair.record, **gold}, parsed["original"], parsed["edited"], statuses,
                                    pair.source_key), **circular_fields(circular_rights(pair, predictions, reader))})
    for perception in dataset.perception:
        line = predictions.answered.get((perception.id, "perception"))
        chosen = None if line is None else read_choice_set(line["response"], perception.record["options"], reader.rule)
        status = tally.add(status_of(line, (perception.id, "perception") in predictions.failed, chosen),
                           None if line is None else last_boxed(line["response"]) is not None)
        items.append(perception_scores(perception.record, chosen, status, perception.source_key))
    return items


class PositionPicks:
    """The first-order answers (original and edited probes of the multiple-choice pairs) and their golds, added a
    chunk of pairs at a time: `result` gives each option letter's share among the answers beside its share among
    the golds (evaluators/circular.py `position_bias`)."""

    def __init__(self) -> None:
        self.labels: set[str] = set()
        self.answers: list[str | None] = []
        self.golds: list[str] = []

    def add(self, pairs: list[VfaithPair], items: list[dict[str, Any]]) -> None:
        """`pairs` and their items (items may hold perception items too, after the pairs)."""
        for pair, item in zip(pairs, items):
            if pair.record["question_type"] == "multiple-choice":
                self.labels.update(option["label"] for option in pair.record["options"])
                self.answers.extend(item[f"a_{probe}"] for probe in PAIR_PROBES)
                self.golds.extend(pair.record[f"answer_{probe}"] for probe in PAIR_PROBES)

    def result(self) -> dict[str, Any]:
        return position_bias(self.answers, self.golds, sorted(self.labels))


def score_vfaith(request: ScoreRequest) -> dict[str, Any]:
    """Score one model's predictions on a dataset; write the score dir and return metrics.json's content."""
    if request.n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {request.n_bootstrap}.")
    stream = stream_vfaith_dataset(request.dataset, fields=SCORED_FIELDS)
    plan = VfaithProbePlan(circular=True)  # accepts the rotations of a circular run; a plain run has none
    table = ItemTable()
    for item in stream.items():  # every record checked; each item's expectations held compactly
        table.add(item.id, plan.expected_probes(item), [image.sha256 for image in plan.images(item)],
                  shown_digest(item_shows(item)))
    predictions = read_predictions(request.predictions, table.probes, request.from_run, table.images,
                                   request.drop_stale, table.shown, request.repeat, index=table)
    if not predictions.answered:
        raise MmfaithError(f"{request.predictions}: no answer at all ({predictions.n_errors} failed calls); nothing "
                           "to score: fix the cause recorded in meta.error and re-run, then score again.")
    out = prepare_out_dir(request.out, "score")
    check_score_dir(out, {"--predictions": request.predictions, "--dataset": request.dataset},
                    {"id": stream.dataset_id, "revision": stream.revision}, predictions.sha256, request.overwrite)
    judge = FreeFormJudge(request.judge)
    tally = Tally(request.coverage_threshold)
    reader = ChoiceReader(request.reader, request.extract)
    spool, summary, picks = ItemSpool(out), Summary(), PositionPicks()
    for start, chunk in _chunks(stream.items(), CHUNK_ITEMS):
        answered, failed = predictions.answered.lines(range(start, start + len(chunk)), None)
        pairs = [item for item in chunk if isinstance(item, VfaithPair)]
        items = score_items(VfaithDataset(pairs, [item for item in chunk if isinstance(item, VfaithPerception)],
                                          stream.dataset_id, stream.revision),
                            replace(predictions, answered=answered, failed=failed), judge, tally, reader)
        for item in items:
            spool.write(item)
            summary.add(item)
        picks.add(pairs, items)
    n_probes = 2 * summary.n_pairs + summary.n_perception
    first_order = sum(SEPARATOR not in probe for _, probe in predictions.answered)
    metrics: dict[str, Any] = {
        "definitions_version": DEFINITIONS_VERSION,
        "provenance": {
            "family": "vfaith", "mmfaith_version": __version__,
            "dataset": {"id": stream.dataset_id, "revision": stream.revision},
            "model": predictions.model, "predictions_sha256": predictions.sha256, "no_image": predictions.no_image,
            "predictions_mode": "run" if request.from_run else "submission", "repeat": request.repeat,
            "prompt_templates_sha256": TEMPLATES_SHA256, "extract": request.extract,
            "judge": {"name": judge.name, "provider": request.judge.provider if request.judge else None,
                      "prompt_sha256": PROMPT_SHA256 if request.judge else None},
            "bootstrap": {"n": request.n_bootstrap, "seed": request.seed, "unit": "source image",
                          "method": "percentile", "confidence": 0.95},
        },
        **summary.result(request.n_bootstrap, request.seed),
        "answers": tally.to_json(),
    }
    if reader.endpoint is not None:
        metrics["reader"] = reader.agreement()
    metrics["counts"].update(n_errors=predictions.n_errors, n_answered=len(predictions.answered),
                             answered_share=round(first_order / n_probes, 6))
    metrics["position_bias"] = picks.result()
    if predictions.n_stale:
        metrics["counts"]["n_stale"] = predictions.n_stale
    publish_scores(out, spool, metrics, write_score_report)
    return metrics


def _chunks(items: Iterator[VfaithItem], size: int) -> Iterator[tuple[int, list[VfaithItem]]]:
    """(position of the first, items) of `size` items at a time, in order."""
    start = 0
    while chunk := list(itertools.islice(items, size)):
        yield start, chunk
        start += len(chunk)
