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

The dataset and predictions are read in two passes (issue 34's bounded memory): the records are checked and
each item's expectations kept compactly (loaders/crm/dataset.py `open_crm_source`, evaluators/prediction_index.py
`ItemTable`), the predictions checked and each answer's place kept (`AnswerIndex`); then questions are read again
and scored UNIT_CHUNK at a time with their answers (`score_chunk`): a chunk's distinct texts embedded in one call,
its units judged, scored and spooled, and what the summaries need folded into numbers (metrics.py `UnitTable`;
the answer tally, the position-bias picks, the CircularEval counts), its texts, steps and vectors dropped before
the next; so memory is a chunk's plus a few dozen bytes a unit, whatever the number of questions or of distinct
texts (the answers' index is dropped before the summaries are made). `workers` processes read the dataset and
the predictions by block and score chunks side by side (mmfaith/ordered_pool.py), merged in dataset order; texts
in no cache are encoded only in this process, chunk after chunk (`scored_chunks`), so the vectors, and the bytes,
do not depend on the number of workers.

Noise floor: the original asked again with another seed (`resample_*`, evaluators/crm/run.py) is
scored as a unit against the original like a variant; `noise_floor` gives its SDR and AFR (with
the block's other rates and clustered CIs): the change sampling alone produces, beside the masked
values. Predictions without the re-sample (a submission, a harness import) leave it null.

Outputs (written whole through a staging folder; evaluators/score_dir.py): metrics.json
(`by_variant["{mode}-{style}"]`, `by_mode` pooled, `specific_vs_random`, `sensitivity`,
provenance), items.jsonl (one line per unit, in dataset then variant order), report.md and
sensitivity.png. The same inputs give the same bytes, whatever the chunk and the number of workers.
"""
from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith import __version__
from mmfaith.clients import ModelEndpoint
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.crm import hallucination
from mmfaith.evaluators.crm.judge import LlmHallucinationJudge, agreement
from mmfaith.evaluators.crm.embed import Encoder, NotEmbedded, load_encoder
from mmfaith.evaluators.circular import (SEPARATOR, circular_correct, labelled_position_bias, original_label,
                                         rotate_options)
from mmfaith.evaluators.crm.metrics import (ANSWER_THRESHOLD, DEFINITIONS_VERSION, STEP_THRESHOLD, Unit, UnitTable,
                                            final_answer, noise_floor, score_unit, summarize, sweep)
from mmfaith.evaluators.crm.prompts import RESAMPLE, TEMPLATES_SHA256, probe_names
from mmfaith.evaluators.crm.report import write_score_report
from mmfaith.evaluators.crm.run import CrmProbePlan, asked, conversations, item_shows, shown
from mmfaith.evaluators.crm.steps import split_steps
from mmfaith.evaluators.coverage import Tally, status_of
from mmfaith.evaluators.prediction_index import AnswerIndex, ItemTable, raw_digests
from mmfaith.evaluators.predictions import PredictionSet, read_predictions, shown_digest
from mmfaith.evaluators.score_settings import ScoreSettings
from mmfaith.evaluators.score_dir import ItemSpool, SpooledChunk, check_score_dir, publish_scores, spooled
from mmfaith.loaders.build_records import TwoPass
from mmfaith.loaders.crm import CrmDataset, CrmItem
from mmfaith.loaders.crm.dataset import open_crm_source
from mmfaith.outdir import prepare_out_dir
from mmfaith.ordered_pool import ordered_map, scoring_workers


SCORED_FIELDS = ("id", "question", "question_type", "answer", "options", "regions", "image_original_sha256",
                 "source.dataset", "source.file_name")
"""What scoring reads of a record (the loader keeps only these: mmfaith/records.py)."""
UNIT_CHUNK = 2048
"""Questions whose units are embedded, judged and scored together (`score_chunk`): a chunk's records, answers,
steps, vectors and similarity matrices are dropped before the next, so they take memory in proportion to the
chunk, not the dataset."""
FLOOR_VARIANT = "original-resample"
"""The re-sampled original's unit, scored like a variant ("{mode}-{style}") and kept out of the masked blocks."""
Key = tuple[str, str]
Expected = tuple[str, tuple[str, ...], bytes, bytes]
"""What an item's prediction lines are checked against (`expected`)."""
_PROBE_TUPLES: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Each distinct tuple of expected probes made in this process, held once (`expected`)."""


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


def embedded_texts(dataset: CrmDataset, answers: dict[Key, str]) -> list[str]:
    """Every text scoring these answers embeds (`tools/make_crm_embeddings.py` ships them for the default suite)."""
    return _plans(dataset.items, answers)[1]


def expected(item: CrmItem) -> Expected:
    """What an item's prediction lines are checked against (evaluators/prediction_index.py `ItemTable`), as the
    table holds it: its id, every probe a run may have asked (a circular run's rotations too; the scores use those
    it did ask: equal tuples held once, so a block of a first pass sends each once), the sha256 of the images it
    shows and its shown digest (raw)."""
    probes = CrmProbePlan(circular=True).expected_probes(item)
    return (item.id, _PROBE_TUPLES.setdefault(probes, probes), raw_digests(image.sha256 for _, image in shown(item)),
            bytes.fromhex(shown_digest(item_shows(item))))


def _item_table(expectations: Collection[Expected]) -> ItemTable:
    table = ItemTable()
    for item_id, probes, images, digest in expectations:
        table.add_raw(item_id, probes, images, digest)
    return table


def read_crm_predictions(dataset: CrmDataset, settings: ScoreSettings, workers: int = 1) -> PredictionSet:
    """The predictions `settings` names, read whole against `dataset` (`expected`), their lines parsed on `workers`
    processes (a scorer reads them in two passes instead: `read_inputs`)."""
    table = _item_table([expected(item) for item in dataset.items])
    return read_predictions(settings.predictions, table.probes, settings.from_run, table.images, settings.drop_stale,
                            table.shown, settings.repeat, workers=workers)


def read_inputs(dataset: Path, settings: ScoreSettings, workers: int) -> tuple[TwoPass[CrmItem, Expected],
                                                                                PredictionSet]:
    """The dataset and the predictions `settings` names, each checked whole in a first pass on `workers`
    processes: the dataset as a `TwoPass` (read again a chunk at a time), the predictions with an `AnswerIndex`
    (each answer's place; `AnswerIndex.lines` reads a chunk's again)."""
    source = open_crm_source(dataset, SCORED_FIELDS, workers, expected)
    table = _item_table(source.expected)
    source.expected.clear()
    return source, read_predictions(settings.predictions, table.probes, settings.from_run, table.images,
                                    settings.drop_stale, table.shown, settings.repeat, workers=workers, index=table)


@dataclass(frozen=True)
class Scoring:
    """What scoring the chunks reads: the dataset (`source`) and the predictions (`read`, an `AnswerIndex`) of
    `read_inputs`, the encoder, the judge (None: the rule alone), the thresholds, and `chunk`, the questions per
    chunk."""

    source: TwoPass[CrmItem, Expected]
    read: PredictionSet
    encoder: Encoder
    judge: LlmHallucinationJudge | None
    coverage_threshold: float
    step_threshold: float = STEP_THRESHOLD
    answer_threshold: float = ANSWER_THRESHOLD
    chunk: int = UNIT_CHUNK


@dataclass(frozen=True)
class Chunk:
    """A chunk of questions as `score_chunk` reads it: the items, their answers by (id, probe) and the (id, probe)s
    whose call failed."""

    items: Sequence[CrmItem]
    answers: dict[Key, str]
    failed: Collection[Key]


def read_chunk(scoring: Scoring, chunk: tuple[int, Any]) -> Chunk:
    """The items of a chunk of `scoring.source.chunks` (position of the first, payload) and their answers, read
    again (on any process)."""
    start, payload = chunk
    items = scoring.source.items(payload)
    index = scoring.read.answered
    assert isinstance(index, AnswerIndex)
    lines, failed = index.lines(range(start, start + len(items)), None)
    return Chunk(items, {key: line["response"] for key, line in lines.items()}, failed)


@dataclass
class ScoredChunk:
    """A chunk's units scored: how many questions it holds and how many of their units lacked an answer, the answer
    tally, per image shown the CircularEval counts (`circular_counts`), the masked units' items.jsonl lines (`lines`,
    in dataset then variant order) and their summary numbers (`units`), the re-sampled originals' (`floor`, the
    noise floor), the original's final answer to each multiple-choice question with its gold and its options' labels
    (`labelled_position_bias`), the first-order answers to the images shown and how many such probes there are
    (`answered_share`), and (with an LLM judge) its masked units' rule and LLM flags and step counts, for
    `judge.agreement`. `add` folds a later chunk's into these (not its lines: they are written as they come)."""

    n_items: int
    missing: int
    tally: Tally
    circular: dict[str, list[int]]
    lines: SpooledChunk = field(default_factory=lambda: SpooledChunk("", []))
    units: UnitTable = field(default_factory=UnitTable)
    floor: UnitTable = field(default_factory=UnitTable)
    picks: list[str | None] = field(default_factory=list)
    golds: list[str] = field(default_factory=list)
    labels: set[str] = field(default_factory=set)
    answered: int = 0
    asked: int = 0
    rule: list[list[int]] = field(default_factory=list)
    llm: list[list[int]] = field(default_factory=list)
    n_steps: list[int] = field(default_factory=list)

    def add(self, other: ScoredChunk) -> None:
        """A later chunk's counts, tally and numbers folded into these."""
        self.n_items += other.n_items
        self.missing += other.missing
        self.tally.add_tally(other.tally)
        for image, numbers in other.circular.items():
            held = self.circular.setdefault(image, [0] * len(numbers))
            held[:] = [a + b for a, b in zip(held, numbers)]
        self.units.extend(other.units)
        self.floor.extend(other.floor)
        self.picks += other.picks
        self.golds += other.golds
        self.labels |= other.labels
        self.answered += other.answered
        self.asked += other.asked
        self.rule += other.rule
        self.llm += other.llm
        self.n_steps += other.n_steps


def score_chunk(scoring: Scoring, chunk: Chunk, encode: bool = True) -> ScoredChunk:
    """The units of a chunk of questions: their distinct texts embedded (one `embed` call: found in a cache or
    encoded together), steps judged, each unit's similarity matrix made and scored; of it only the lines and the
    summaries' numbers are returned. Each final answer is read once, for the units and the tally. With `encode`
    False, a text in no cache raises NotEmbedded."""
    items, answers = chunk.items, chunk.answers
    plans, ordered, missing = _plans(items, answers)
    vectors = dict(zip(ordered, scoring.encoder.embed(ordered, encode))) if ordered else {}
    del ordered
    finals: dict[Key, str | None] = {}

    def final(item: CrmItem, probe: str) -> str | None:
        key = (item.id, probe)
        if key not in finals:
            finals[key] = final_answer(answers.get(key), item.record["options"])
        return finals[key]

    def cos(a: str | None, b: str | None) -> float | None:
        return None if not a or not b else float(vectors[a] @ vectors[b])

    def case(plan: Plan) -> tuple[str, list[str], list[str]]:
        item, _, steps, _, _ = plan
        return item.record["question"], [region["label"] for region in item.record["regions"]], steps[1]

    flags = [[i for i, step in enumerate(steps) if hallucination.flags(step, labels, question)]
             for question, labels, steps in map(case, plans)]
    scored = ScoredChunk(len(items), missing, Tally(scoring.coverage_threshold), circular_counts(items, answers))
    if scoring.judge is not None:
        # The LLM judge reads masked units only; the re-sample's HR (unused beside its SDR and AFR) is the rule's.
        judged = [j for j, plan in enumerate(plans) if plan[1] != RESAMPLE]
        scored.rule, scored.n_steps = [flags[j] for j in judged], [len(plans[j][2][1]) for j in judged]
        scored.llm = scoring.judge.flag_all([case(plans[j]) for j in judged])
        for j, flagged in zip(judged, scored.llm):
            flags[j] = flagged
    masked = []
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
            scored.floor.add(line, not free)
        else:
            scored.units.add(line, not free)
            masked.append(line)
    scored.lines = spooled(masked)
    for item in items:
        for name, _ in shown(item):
            for probe, is_answer in zip(probe_names(name), (False, True)):
                text = answers.get((item.id, probe))
                reading = final(item, probe) if is_answer else (text or "").strip() or None
                scored.tally.add(status_of(None if text is None else {"response": text},
                                           (item.id, probe) in chunk.failed, reading))
        scored.asked += 2 * len(shown(item))
        if item.record["options"]:
            scored.picks.append(final(item, "original_answer"))
            scored.golds.append(item.record["answer"])
            scored.labels.update(option["label"] for option in item.record["options"])
    scored.answered = sum(SEPARATOR not in probe and not probe.startswith(RESAMPLE) for _, probe in answers)
    return scored


def scored_chunks(scoring: Scoring, workers: int) -> Iterator[ScoredChunk]:
    """Every chunk scored, in order, on `workers` forked processes (mmfaith/ordered_pool.py), each reading its
    chunk's records and answers itself (`read_chunk`). Texts are encoded only here, chunk after chunk, a chunk's
    texts in no cache together: a chunk a worker finds such a text in is read and scored here in its turn, so every
    vector comes from the same batch whatever the number of workers. With an LLM judge (its calls run on threads
    of their own), chunks are scored here."""
    chunks = scoring.source.chunks(scoring.chunk)
    head = list(itertools.islice(chunks, 2))
    chunks = itertools.chain(head, chunks)
    if workers <= 1 or scoring.judge is not None or len(head) <= 1:
        yield from (score_chunk(scoring, read_chunk(scoring, chunk)) for chunk in chunks)
        return
    taken: deque[tuple[int, Any]] = deque()  # the chunks given to the workers, in order, until scored

    def given() -> Iterator[tuple[int, Any]]:
        for chunk in chunks:
            taken.append(chunk)
            yield chunk

    def cached(chunk: tuple[int, Any]) -> ScoredChunk | None:
        try:
            return score_chunk(scoring, read_chunk(scoring, chunk), encode=False)
        except NotEmbedded:
            return None

    for scored in ordered_map(cached, given(), workers):
        chunk = taken.popleft()
        yield scored if scored is not None else score_chunk(scoring, read_chunk(scoring, chunk))


def _original_label(record: dict[str, Any], response: str | None, k: int) -> str | None:
    """The option (its label in the original order) a final answer to rotation k of the options names."""
    picked = final_answer(response, rotate_options(record["options"], k))
    return original_label(record["options"], k, picked)


def circular_counts(items: Sequence[CrmItem], answers: dict[Key, str]) -> dict[str, list[int]]:
    """Per image shown ("original", each variant "{mode}-{style}"), in order of first appearance, over the
    multiple-choice items asked in every rotation of the options there (`run --circular`): [items, right in the
    first order, right in every rotation (evaluators/circular.py)]; empty for a run without rotations."""
    counts: dict[str, list[int]] = {}
    if not any(SEPARATOR in probe for _, probe in answers):
        return counts  # no rotation answered: a run without --circular
    for item in items:
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
            held = counts.setdefault(image, [0, 0, 0])
            held[0] += 1
            held[1] += rights[0]
            held[2] += circular_correct(rights)
    return counts


def circular_block(counts: dict[str, list[int]]) -> dict[str, Any] | None:
    """metrics.json's `circular`: per image shown, over the multiple-choice items asked in every rotation of the
    options there (`circular_counts`, summed over the chunks), the first-order accuracy of its final answer beside
    `accuracy_circular` (right in every rotation); None for a run without rotations."""
    if not counts:
        return None
    return {image: {"n_items": n, "accuracy": round(first / n, 6), "accuracy_circular": round(every / n, 6)}
            for image, (n, first, every) in counts.items()}


def score_crm(request: CrmScoreRequest) -> dict[str, Any]:
    """Score one model's predictions on a CRM dataset; write the score dir; return metrics.json's content."""
    _check(request)
    workers = scoring_workers(request.workers)
    source, read = read_inputs(request.dataset, request, workers)
    if not read.answered:
        raise MmfaithError(f"{request.predictions}: no answer at all ({read.n_errors} failed calls); nothing to score.")
    out = prepare_out_dir(request.out, "score")
    dataset_block = {"id": source.dataset_id, "revision": source.revision}
    check_score_dir(out, {"--predictions": request.predictions, "--dataset": request.dataset}, dataset_block,
                    read.sha256, request.overwrite)
    encoder = load_encoder(request.sbert_model, request.batch_size)
    if request.judge_agreement and request.judge is None:
        raise MmfaithError("--judge-agreement compares the rule judge with an LLM judge: add --judge MODEL.")
    judge = LlmHallucinationJudge(request.judge, request.judge_workers) if request.judge is not None else None
    scoring = Scoring(source, read, encoder, judge, request.coverage_threshold, request.step_threshold,
                      request.answer_threshold, request.chunk)
    spool, total = ItemSpool(out), ScoredChunk(0, 0, Tally(request.coverage_threshold), {})
    for scored in scored_chunks(scoring, workers):
        spool.add(scored.lines)
        total.add(scored)
    del scoring
    read = replace(read, answered={}, failed=frozenset())  # the answers' index, dropped: every chunk was read
    units = total.units
    if not len(units):
        spool.close().unlink()
        raise MmfaithError(f"{request.predictions}: no (question, variant) has all four answers (original and masked "
                           "CoT and final answer); nothing to score.")
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
        **summarize(units, request.n_bootstrap, request.seed),
        "noise_floor": noise_floor(total.floor, request.n_bootstrap, request.seed),
        "sensitivity": sweep(units),
        "answers": total.tally.to_json(),
        "counts": {"n_items": total.n_items, "n_units": len(units), "n_missing": total.missing,
                   "n_errors": read.n_errors, "n_stale": read.n_stale,
                   "answered_share": round(total.answered / total.asked, 6)},
        "circular": circular_block(total.circular),
        "position_bias": labelled_position_bias(total.picks, total.golds, total.labels),
    }
    if request.judge_agreement:
        metrics["judge_agreement"] = agreement(total.rule, total.llm, total.n_steps)
    publish_scores(out, spool, metrics, write_score_report)
    return metrics
