"""`mmfaith score crm`: validate predictions, split and embed every chain of thought, write the scores.

Inputs: a CRM dataset (loaders.crm) and predictions.jsonl (one line per call, probes
`{image}_cot` / `{image}_answer`), read by the shared reader (evaluators/predictions.py: a
submission is validated whole; `from_run` lets the last answered line win; lines about other
images are stale).

Per (question, variant) unit (evaluators/crm/metrics.py): the original and masked steps
(evaluators/crm/steps.py), their Sentence-BERT cosines (evaluators/crm/embed.py: each distinct
text embedded once, cached under $MMFAITH_CACHE), the final answers, the hallucination judge's
flags (the rule, evaluators/crm/hallucination.py, or an LLM judge). A unit whose original or
masked CoT has no answer is not scored (counted as `n_missing`).

Questions are scored UNIT_CHUNK at a time (`score_chunk`): a chunk's distinct texts embedded in one
call, its units judged, scored and spooled, its steps and vectors dropped before the next, so memory
is bounded by the chunk whatever the number of distinct texts. `workers` processes read the dataset and
the predictions by block (loaders/build_records.py, evaluators/predictions.py) and score chunks side
by side (mmfaith/ordered_pool.py), merged in dataset order; texts in no cache are encoded only in
this process, chunk after chunk (`scored_chunks`), so the vectors, and the bytes, do not depend on
the number of workers.

Noise floor: the original asked again with another seed (`resample_*`, evaluators/crm/run.py) is
scored as a unit against the original like a variant; `noise_floor` gives its SDR and AFR (with
the block's other rates and clustered CIs): the change sampling alone produces, beside the masked
values. Predictions without the re-sample (a submission, a harness import) leave it null.

Outputs (written whole through a staging folder; evaluators/score_dir.py): metrics.json
(`by_variant["{mode}-{style}"]`, `by_mode` pooled, `specific_vs_random`, `sensitivity`,
provenance), items.jsonl (one line per unit, in dataset then variant order), report.md and
sensitivity.png. The same inputs give the same bytes.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith import __version__
from mmfaith.clients import ModelEndpoint
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.crm import hallucination
from mmfaith.evaluators.crm.judge import LlmHallucinationJudge, agreement
from mmfaith.evaluators.crm.embed import Encoder, NotEmbedded, load_encoder
from mmfaith.evaluators.circular import (SEPARATOR, circular_correct, options_position_bias, original_label,
                                         rotate_options)
from mmfaith.evaluators.crm.metrics import (ANSWER_THRESHOLD, DEFINITIONS_VERSION, STEP_THRESHOLD, SUMMARY_FIELDS, Unit,
                                            final_answer, noise_floor, score_unit, summarize, sweep)
from mmfaith.evaluators.crm.prompts import RESAMPLE, TEMPLATES_SHA256, probe_names
from mmfaith.evaluators.crm.report import write_score_report
from mmfaith.evaluators.crm.run import CrmProbePlan, asked, conversations, item_shows, shown
from mmfaith.evaluators.crm.steps import split_steps
from mmfaith.evaluators.coverage import Tally, status_of
from mmfaith.evaluators.predictions import PerItem, PredictionSet, read_predictions, shown_digest
from mmfaith.evaluators.score_settings import ScoreSettings
from mmfaith.evaluators.score_dir import ItemSpool, SpooledChunk, check_score_dir, publish_scores, spooled
from mmfaith.loaders.crm import CrmDataset, CrmItem, open_crm_dataset
from mmfaith.outdir import prepare_out_dir
from mmfaith.records import Shared, keep_fields
from mmfaith.ordered_pool import ordered_map, scoring_workers


SCORED_FIELDS = ("id", "question", "question_type", "answer", "options", "regions", "image_original_sha256",
                 "source.dataset", "source.file_name")
"""What scoring reads of a record (the loader keeps only these: mmfaith/records.py)."""
UNIT_CHUNK = 2048
"""Questions whose units are embedded, judged and scored together (`score_chunk`): a chunk's steps, vectors and
similarity matrices are dropped before the next, so they take memory in proportion to the chunk, not the dataset."""
FLOOR_VARIANT = "original-resample"
"""The re-sampled original's unit, scored like a variant ("{mode}-{style}") and kept out of the masked blocks."""


@dataclass(frozen=True, kw_only=True)
class CrmScoreRequest(ScoreSettings):
    """What to score and how (the flags of `mmfaith score crm`)."""

    dataset: Path
    sbert_model: Path | None = None
    step_threshold: float = STEP_THRESHOLD
    answer_threshold: float = ANSWER_THRESHOLD
    batch_size: int = 256
    judge: ModelEndpoint | None = None
    judge_workers: int = 4
    judge_agreement: bool = False
    workers: int | None = None
    """Processes reading the dataset and predictions by block and scoring chunks side by side (`scored_chunks`);
    the same bytes whatever their number."""
    chunk: int = UNIT_CHUNK


def _check(request: CrmScoreRequest) -> None:
    for name, value in (("--step-threshold", request.step_threshold), ("--answer-threshold", request.answer_threshold)):
        if not -1.0 <= value <= 1.0:
            raise MmfaithError(f"{name} is a cosine similarity in [-1, 1], not {value}.")
    if request.n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {request.n_bootstrap}.")


Plan = tuple[CrmItem, str, tuple[list[str], list[str]], str, str]
"""A scorable unit before its similarities: item, variant, (original steps, masked steps), both final answers."""


def _plans(items: Sequence[CrmItem], answers: dict[tuple[str, str], str]) -> tuple[list[Plan], list[str], int]:
    """Every scorable unit's plan, the texts scoring embeds (sorted, each once), and how many units lacked an
    answer."""
    plans: list[Plan] = []
    texts: set[str] = set()
    missing = 0
    for item in items:
        original_cot, original_answer = (answers.get((item.id, probe)) for probe in probe_names("original"))
        original_steps = None
        for name, _ in asked(item)[1:]:
            cot, answer = (answers.get((item.id, probe)) for probe in probe_names(name))
            if None in (original_cot, original_answer, cot, answer):
                missing += name != RESAMPLE
                continue
            original_steps = original_steps if original_steps is not None else split_steps(original_cot)
            steps = (original_steps, split_steps(cot))
            plans.append((item, name, steps, original_answer, answer))
            texts.update(steps[0] + steps[1])
            if not item.record["options"]:
                texts.update(t for t in (original_answer, answer, item.record["answer"]) if t)
    return plans, sorted(texts), missing


def embedded_texts(dataset: CrmDataset, answers: dict[tuple[str, str], str]) -> list[str]:
    """Every text scoring these answers embeds (`tools/make_crm_embeddings.py` ships them for the default suite)."""
    return _plans(dataset.items, answers)[1]


@dataclass(frozen=True)
class Scoring:
    """What scoring a chunk of questions reads: the items, the answers by (id, probe) and the (id, probe)s whose call
    failed, the encoder, the judge (None: the rule alone), the thresholds, and `chunk`, the questions per chunk."""

    items: Sequence[CrmItem]
    answers: dict[tuple[str, str], str]
    failed: frozenset[tuple[str, str]]
    encoder: Encoder
    judge: LlmHallucinationJudge | None
    coverage_threshold: float
    step_threshold: float = STEP_THRESHOLD
    answer_threshold: float = ANSWER_THRESHOLD
    chunk: int = UNIT_CHUNK


@dataclass
class ScoredChunk:
    """A chunk's units scored: the masked units' items.jsonl lines and kept fields (`spooled`, in dataset then
    variant order), the re-sampled originals' kept lines (the noise floor), how many units lacked an answer, the
    chunk's answer tally, the original's final answer to each multiple-choice question (`options_position_bias`),
    and (with an LLM judge) its masked units' rule and LLM flags and step counts, for
    `judge.agreement`."""

    units: SpooledChunk
    floor: list[dict[str, Any]]
    missing: int
    tally: Tally
    picks: list[str | None]
    rule: list[list[int]]
    llm: list[list[int]]
    n_steps: list[int]


def score_chunk(scoring: Scoring, start: int, encode: bool = True) -> ScoredChunk:
    """The units of the `scoring.chunk` questions from `start`: their distinct texts embedded (one `embed` call:
    found in a cache or encoded together), steps judged, each unit's similarity matrix made and scored; of it only
    the lines and kept fields are returned. Each final answer is read once, for the units and the tally. With
    `encode` False, a text in no cache raises NotEmbedded."""
    items = scoring.items[start:start + scoring.chunk]
    plans, ordered, missing = _plans(items, scoring.answers)
    vectors = dict(zip(ordered, scoring.encoder.embed(ordered, encode))) if ordered else {}
    del ordered
    finals: dict[tuple[str, str], str | None] = {}

    def final(item: CrmItem, probe: str) -> str | None:
        key = (item.id, probe)
        if key not in finals:
            finals[key] = final_answer(scoring.answers.get(key), item.record["options"])
        return finals[key]

    def cos(a: str | None, b: str | None) -> float | None:
        return None if not a or not b else float(vectors[a] @ vectors[b])

    def case(plan: Plan) -> tuple[str, list[str], list[str]]:
        item, _, steps, _, _ = plan
        return item.record["question"], [region["label"] for region in item.record["regions"]], steps[1]

    flags = [[i for i, step in enumerate(steps) if hallucination.flags(step, labels, question)]
             for question, labels, steps in map(case, plans)]
    rule: list[list[int]] = []
    llm: list[list[int]] = []
    n_steps: list[int] = []
    if scoring.judge is not None:
        # The LLM judge reads masked units only; the re-sample's HR (unused beside its SDR and AFR) is the rule's.
        judged = [j for j, plan in enumerate(plans) if plan[1] != RESAMPLE]
        rule, n_steps = [flags[j] for j in judged], [len(plans[j][2][1]) for j in judged]
        llm = scoring.judge.flag_all([case(plans[j]) for j in judged])
        for j, flagged in zip(judged, llm):
            flags[j] = flagged
    masked, floor, shared = [], [], Shared()
    for j, (item, name, (original_steps, masked_steps), original_answer, answer) in enumerate(plans):
        record = item.record
        matrix = (np.array([[vectors[o] @ vectors[m] for m in masked_steps] for o in original_steps])
                  if original_steps and masked_steps else np.zeros((len(original_steps), len(masked_steps))))
        free = not record["options"]
        unit = Unit(original_steps, masked_steps, matrix, original_answer, answer,
                    cos(original_answer, answer) if free else None,
                    (cos(original_answer, record["answer"]), cos(answer, record["answer"])) if free
                    else (None, None), flags[j])
        line = score_unit(record, FLOOR_VARIANT if name == RESAMPLE else name, item.source_key, unit,
                          scoring.step_threshold, scoring.answer_threshold,
                          (final(item, probe_names("original")[1]), final(item, probe_names(name)[1])))
        if name == RESAMPLE:
            floor.append(keep_fields(line, SUMMARY_FIELDS, shared))  # noise_floor reads these, held small
        else:
            masked.append(line)
    tally = Tally(scoring.coverage_threshold)
    for item in items:
        for name, _ in shown(item):
            for probe, is_answer in zip(probe_names(name), (False, True)):
                text = scoring.answers.get((item.id, probe))
                reading = final(item, probe) if is_answer else (text or "").strip() or None
                tally.add(status_of(None if text is None else {"response": text}, (item.id, probe) in scoring.failed,
                                    reading))
    picks = [final(item, "original_answer") for item in items if item.record["options"]]
    return ScoredChunk(spooled(masked, SUMMARY_FIELDS), floor, missing, tally, picks, rule, llm, n_steps)


def scored_chunks(scoring: Scoring, workers: int) -> Iterator[ScoredChunk]:
    """Every chunk scored, in order, on `workers` forked processes (mmfaith/ordered_pool.py). Texts are encoded
    only here, chunk after chunk, a chunk's texts in no cache together: a chunk a worker finds such a text in is
    scored here in its turn, so every vector comes from the same batch whatever the number of workers. With an LLM
    judge (its calls run on threads of their own), chunks are scored here."""
    starts = range(0, len(scoring.items), scoring.chunk)
    if workers <= 1 or scoring.judge is not None or len(starts) <= 1:
        yield from (score_chunk(scoring, start) for start in starts)
        return

    def cached(start: int) -> ScoredChunk | None:
        try:
            return score_chunk(scoring, start, encode=False)
        except NotEmbedded:
            return None

    for start, scored in zip(starts, ordered_map(cached, starts, workers)):
        yield scored if scored is not None else score_chunk(scoring, start)


def _original_label(record: dict[str, Any], response: str | None, k: int) -> str | None:
    """The option (its label in the original order) a final answer to rotation k of the options names."""
    picked = final_answer(response, rotate_options(record["options"], k))
    return original_label(record["options"], k, picked)


def circular_block(dataset: CrmDataset, answers: dict[tuple[str, str], str]) -> dict[str, Any] | None:
    """metrics.json's `circular`: per image shown ("original", each variant "{mode}-{style}"), over the
    multiple-choice items asked in every rotation of the options there (`run --circular`), the first-order
    accuracy of its final answer beside `accuracy_circular` (right in every rotation, evaluators/circular.py);
    None for a run without rotations."""
    if not any(SEPARATOR in probe for _, probe in answers):
        return None  # no rotation answered: a run without --circular
    first: dict[str, list[bool]] = {}
    every: dict[str, list[bool]] = {}
    for item in dataset.items:
        record = item.record
        if not record["options"]:
            continue
        asked_by_image: dict[str, list[tuple[int, str | None]]] = {}
        for name, _, k in conversations(item, True):
            if name != RESAMPLE:
                asked_by_image.setdefault(name.split(SEPARATOR)[0], []).append(
                    (k, answers.get((item.id, probe_names(name)[1]))))
        for image, asked_here in asked_by_image.items():
            if len(asked_here) < 2 or all(answer is None for _, answer in asked_here[1:]):
                continue
            rights = [answer is not None and _original_label(record, answer, k) == record["answer"]
                      for k, answer in asked_here]
            first.setdefault(image, []).append(rights[0])
            every.setdefault(image, []).append(circular_correct(rights))
    if not first:
        return None
    return {image: {"n_items": len(first[image]), "accuracy": round(sum(first[image]) / len(first[image]), 6),
                    "accuracy_circular": round(sum(every[image]) / len(every[image]), 6)} for image in first}


def read_crm_predictions(dataset: CrmDataset, settings: ScoreSettings, workers: int = 1) -> PredictionSet:
    """The predictions `settings` names, read against every probe a run may have asked of `dataset` (a circular
    run's rotations too; the scores use those it did ask), their lines parsed on `workers` processes."""
    items = dataset.by_id()
    return read_predictions(settings.predictions, PerItem(items, CrmProbePlan(circular=True).expected_probes),
                            settings.from_run, PerItem(items, lambda item: {image.sha256 for _, image in shown(item)}),
                            settings.drop_stale, PerItem(items, lambda item: shown_digest(item_shows(item))),
                            settings.repeat, workers=workers)


def score_crm(request: CrmScoreRequest) -> dict[str, Any]:
    """Score one model's predictions on a CRM dataset; write the score dir; return metrics.json's content."""
    _check(request)
    workers = scoring_workers(request.workers)
    dataset = open_crm_dataset(request.dataset, fields=SCORED_FIELDS, workers=workers)
    read = read_crm_predictions(dataset, request, workers)
    if not read.answered:
        raise MmfaithError(f"{request.predictions}: no answer at all ({read.n_errors} failed calls); nothing to score.")
    out = prepare_out_dir(request.out, "score")
    dataset_block = {"id": dataset.dataset_id, "revision": dataset.revision}
    check_score_dir(out, {"--predictions": request.predictions, "--dataset": request.dataset}, dataset_block,
                    read.sha256, request.overwrite)
    encoder = load_encoder(request.sbert_model, request.batch_size)
    answers = {key: line["response"] for key, line in read.answered.items()}
    read.answered.clear()  # scoring reads the responses alone: each line's dict is dropped (memory per line)
    if request.judge_agreement and request.judge is None:
        raise MmfaithError("--judge-agreement compares the rule judge with an LLM judge: add --judge MODEL.")
    judge = LlmHallucinationJudge(request.judge, request.judge_workers) if request.judge is not None else None
    scoring = Scoring(dataset.items, answers, read.failed, encoder, judge, request.coverage_threshold,
                      request.step_threshold, request.answer_threshold, request.chunk)
    spool, lines, floor, tally = ItemSpool(out, SUMMARY_FIELDS), [], [], Tally(request.coverage_threshold)
    missing, picks, rule, llm, n_steps = 0, [], [], [], []
    for scored in scored_chunks(scoring, workers):
        lines += spool.add(scored.units)
        floor += scored.floor
        missing += scored.missing
        tally.add_tally(scored.tally)
        picks += scored.picks
        rule += scored.rule
        llm += scored.llm
        n_steps += scored.n_steps
    if not lines:
        spool.close().unlink()
        raise MmfaithError(f"{request.predictions}: no (question, variant) has all four answers (original and masked "
                           "CoT and final answer); nothing to score.")
    records = {item.id: item.record for item in dataset.items}
    metrics: dict[str, Any] = {
        "definitions_version": DEFINITIONS_VERSION,
        "provenance": {
            "family": "crm", "mmfaith_version": __version__, "dataset": dataset_block, "model": read.model,
            "predictions_sha256": read.sha256, "no_image": read.no_image,
            "predictions_mode": "run" if request.from_run else "submission", "repeat": request.repeat,
            "prompt_templates_sha256": TEMPLATES_SHA256,
            "sbert": {"model": encoder.name, "weights_sha256": encoder.weights_sha256},
            "thresholds": {"step": request.step_threshold, "answer": request.answer_threshold},
            "judge": {"name": judge.name if judge else "rule", "rules_version": hallucination.RULES_VERSION,
                      "provider": request.judge.provider if request.judge else None,
                      "prompt_sha256": judge.prompt_sha256 if judge else None,
                      "fallbacks": judge.fallbacks if judge else 0},
            "bootstrap": {"n": request.n_bootstrap, "seed": request.seed, "unit": "source image",
                          "method": "percentile", "confidence": 0.95},
        },
        **summarize(lines, request.n_bootstrap, request.seed),
        "noise_floor": noise_floor(floor, request.n_bootstrap, request.seed),
        "sensitivity": sweep(lines, records),
        "answers": tally.to_json(),
        "counts": {"n_items": len(dataset.items), "n_units": len(lines), "n_missing": missing,
                   "n_errors": read.n_errors, "n_stale": read.n_stale,
                   "answered_share": round(sum(SEPARATOR not in probe and not probe.startswith(RESAMPLE)
                                               for _, probe in answers)
                                           / sum(2 * len(shown(item)) for item in dataset.items), 6)},
        "circular": circular_block(dataset, answers),
        "position_bias": options_position_bias([item.record for item in dataset.items], picks),
    }
    if request.judge_agreement:
        metrics["judge_agreement"] = agreement(rule, llm, n_steps)
    publish_scores(out, spool, metrics, write_score_report)
    return metrics
