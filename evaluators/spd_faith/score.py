"""`mmfaith score spd-faith`: validate predictions, judge every item, write the scores.

Inputs: an SPD-Faith dataset (loaders.spd_faith) and predictions.jsonl (schemas/
prediction.schema.json: one line per model call; also the submission format).

Predictions are read by the shared reader (evaluators/predictions.py): a submission (the default)
is validated as a whole with every bad line reported at once; with `from_run` (`--from-run`) the
last answered line of an (id, probe) wins; a line whose response is null is a failed call
(counted in `n_errors`), not an answer; a line that showed other images than the pair's (the
build was remade after the run) is refused, or with `drop_stale` (`--drop-stale`) dropped and
counted (`n_stale`). A probe with no answer is `missing` (counted per probe and scored as
unanswered).

A prediction set with no answer at all (every line failed) is refused: there is nothing to score.
metrics.json's counts carry `n_answered` and `answered_share` (of n_items x 4 probes).

The score dir (`--out`) is checked first (`mmfaith.outdir`). It is written whole: the outputs go to
a staging folder beside it, which then replaces it, so a failed score leaves the old one intact and
no file of an older score survives. A non-empty `--out` is replaced only when it is a previous
score of the same inputs (its metrics.json names the same dataset revision and predictions
sha256) or with `overwrite` (`--overwrite`); otherwise it is refused.

An official SPD-Faith-Bench response file (one JSON object with a `responses` list; `format`
"official", or detected by shape with "auto") is read by spd_faith/official_responses.py instead:
its rows are matched by sample_id to the dataset (the imported build), only those pairs are scored,
metrics it cannot support are null with the reason, and report.md gains a comparison with the
official script's numbers.

Outputs in the score dir: metrics.json (schemas/spd_faith_metrics.schema.json), items.jsonl
(schemas/spd_faith_item_scores.schema.json, one line per pair in dataset order), report.md and
PNG plots (spd_faith/report.py). The same inputs give the same bytes (the bootstrap is seeded; LLM judge
answers are cached under the mmfaith cache dir, `mmfaith.cache`, never in the score dir).
"""
from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.clients import ModelEndpoint
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.spd_faith import official_responses
from mmfaith.evaluators.spd_faith.judge import LlmJudge, claim_agreement
from mmfaith.evaluators.answers import last_boxed
from mmfaith.evaluators.coverage import Tally, status_of
from mmfaith.evaluators.prediction_index import AnswerIndex, ItemTable, raw_digests
from mmfaith.evaluators.predictions import read_predictions, shown_digest
from mmfaith.evaluators.score_settings import ScoreSettings
from mmfaith.evaluators.score_dir import ItemSpool, SpooledChunk, check_score_dir, publish_scores, spooled
from mmfaith.evaluators.spd_faith.claims import CLAIM_PROBES, RULES_VERSION, Judge, Judgement, RuleJudge
from mmfaith.evaluators.spd_faith.metrics import DEFINITIONS_VERSION, Answer, Summary, judge_case, score_item
from mmfaith.evaluators.spd_faith.prompts import PROBES, TEMPLATES_SHA256
from mmfaith.evaluators.spd_faith.report import write_score_report
from mmfaith.evaluators.spd_faith.run import item_shows
from mmfaith.jsonl import canonical_json
from mmfaith.loaders.build_records import TwoPass
from mmfaith.loaders.spd_faith.dataset import SpdDataset, SpdPair, open_spd_source
from mmfaith.ordered_pool import ordered_map, scoring_workers
from mmfaith.outdir import prepare_out_dir

JUDGE_CHUNK = 4096
"""Pairs judged and scored at a time (the unit of work of a worker process): memory holds a few chunks' cases and
judgements, not every pair's."""

SCORED_FIELDS = ("id", "subset", "difficulty", "num_differences", "differences", "image_a_sha256", "image_b_sha256",
                 "source.dataset", "source.file_name", "source.official")
"""What scoring reads of a pair record (the loader keeps only these: mmfaith/records.py)."""


@dataclass(frozen=True, kw_only=True)
class ScoreRequest(ScoreSettings):
    """What to score and how; `judge` None is the rule judge."""

    dataset: Path | None
    """None: only for an official response file, whose own ground truth is then the gold."""
    judge: ModelEndpoint | None = None
    judge_workers: int = 4
    judge_agreement: bool = False
    format: str = "auto"
    """auto (an official response file is detected by its shape), predictions, or official."""
    workers: int | None = None
    """Processes reading the dataset and the predictions by block, and scoring chunks of pairs side by side with
    the rule judge (mmfaith/ordered_pool.py); None: the usable cores. The files are the same whatever the number."""
    chunk: int = JUDGE_CHUNK
    """Pairs judged and scored at a time (the files are the same whatever the size)."""


@dataclass(frozen=True)
class Predictions:
    """The answers of one model: (id, probe) -> Answer (read with `index_predictions`: the `AnswerIndex` of the
    answers' lines, `chunk_answers` reads a chunk's), and what the file held besides (`perturb`: the image
    perturbation its lines record in meta.perturb, None when unperturbed)."""

    answers: Mapping[tuple[str, str], Any]
    model: str
    n_errors: int
    n_stale: int
    sha256: str
    perturb: dict[str, Any] | None = None
    failed: Collection[tuple[str, str]] = frozenset()
    no_image: bool = False


@dataclass(frozen=True)
class ScoredChunk:
    """What scoring a chunk of pairs gives back (on a worker process): the items' lines, their summary folded
    (`metrics.Summary`: numbers), the chunk's answer tally and answered count, and with --judge-agreement the rule
    judge's and the judge's readings and which claiming probes were answered."""

    items: SpooledChunk
    summary: Summary
    tally: Tally
    n_answered: int
    agreement: tuple[list[Judgement], list[Judgement], list[dict[str, bool]]] | None


def _expected(pair: SpdPair) -> tuple[str, bytes, bytes]:
    """What a pair's prediction lines are checked against (evaluators/prediction_index.py `ItemTable.add_raw`): its
    id, its two images' digests and its shown digest, raw (its probes are PROBES); what the first pass holds of a
    pair until the table holds the same objects."""
    return (pair.id, raw_digests((pair.record["image_a_sha256"], pair.record["image_b_sha256"])),
            bytes.fromhex(shown_digest(item_shows(pair))))


def _perturb(line: dict[str, Any]) -> str:
    """The image perturbation a line records (meta.perturb), as canonical JSON: one per file."""
    return canonical_json((line.get("meta") or {}).get("perturb"))


def index_predictions(path: Path, expected: Iterable[tuple[str, bytes, bytes]], from_run: bool,
                      drop_stale: bool = False, repeat: int = 0, workers: int = 1) -> Predictions:
    """Read and validate predictions against the pairs' `_expected` (evaluators/predictions.py, its lines parsed on
    `workers` processes), keeping each answer's place (`chunk_answers` reads a chunk's answers)."""
    table = ItemTable()
    for pair_id, images, shown in expected:
        table.add_raw(pair_id, PROBES, images, shown)
    read = read_predictions(path, table.probes, from_run, table.images, drop_stale, table.shown, repeat,
                            workers=workers, index=table, fact=_perturb)
    assert isinstance(read.answered, AnswerIndex)
    perturbs = read.answered.facts()
    if len(perturbs) > 1:
        raise MmfaithError(f"{path}: lines of several image perturbations ({', '.join(sorted(perturbs))}); score each "
                           "run dir (one per --perturb ratio) on its own.")
    perturb = json.loads(perturbs.pop()) if perturbs else None
    return Predictions(read.answered, read.model, read.n_errors, read.n_stale, read.sha256, perturb, read.failed,
                       read.no_image)


def load_predictions(path: Path, dataset: SpdDataset, from_run: bool, drop_stale: bool = False,
                     repeat: int = 0, workers: int = 1) -> Predictions:
    """`index_predictions` of a dataset's pairs, every answer read (`Answer`: as the metrics read it)."""
    read = index_predictions(path, map(_expected, dataset.pairs), from_run, drop_stale, repeat, workers)
    answers, failed = chunk_answers(read, range(len(dataset.pairs)))
    return replace(read, answers=answers, failed=failed)


def chunk_answers(predictions: Predictions, positions: range
                  ) -> tuple[Mapping[tuple[str, str], Answer], Collection[tuple[str, str]]]:
    """The answers and failed (id, probe)s of the pairs at `positions` (dataset order): read from their lines'
    places (`index_predictions`), or the answers held (an official response file)."""
    if not isinstance(predictions.answers, AnswerIndex):
        return predictions.answers, predictions.failed
    lines, failed = predictions.answers.lines(positions, None)
    return {key: Answer(line["response"], (line.get("meta") or {}).get("finish_reason") == "length",
                        (line.get("meta") or {}).get("order")) for key, line in lines.items()}, failed


def answer_tally(items: Sequence[dict[str, Any]], predictions: Predictions, threshold: float) -> Tally:
    """Every expected answer's status (evaluators/coverage.py) from the items' reads (metrics.read_answer: a
    yes/no, a count, or a claims list for describe); paper format: a \\boxed{} (the prompts' format, appendix B)."""
    tally = Tally(threshold)
    for item in items:
        for probe in PROBES:
            answer = predictions.answers.get((item["id"], probe))
            read = item["answers"][probe]
            understood = read["value"] if probe != "describe" else (read["status"] in ("ok", "truncated") or None)
            tally.add(status_of(None if answer is None else {"response": answer.response},
                                (item["id"], probe) in predictions.failed, understood),
                      None if answer is None or not answer.response else last_boxed(answer.response) is not None)
    return tally


def _judge(request: ScoreRequest) -> Judge:
    if request.judge is None:
        if request.judge_agreement:
            raise MmfaithError("--judge-agreement compares the rule judge with an LLM judge: add --judge MODEL.")
        return RuleJudge()
    if request.judge_workers < 1:
        raise MmfaithError(f"--judge-workers must be 1 or more, not {request.judge_workers}.")
    return LlmJudge(request.judge, request.judge_workers)


def _provenance(request: ScoreRequest, source: TwoPass[SpdPair, Any], predictions: Predictions,
                judge: Judge) -> dict[str, Any]:
    perturb = {"perturb": predictions.perturb} if predictions.perturb is not None else {}
    return {
        **perturb,
        "family": "spd-faith",
        "mmfaith_version": __version__,
        "dataset": {"id": source.dataset_id, "revision": source.revision},
        "model": predictions.model,
        "predictions_sha256": predictions.sha256,
        "no_image": predictions.no_image,
        "predictions_mode": "run" if request.from_run else "submission", "repeat": request.repeat,
        "prompt_templates_sha256": TEMPLATES_SHA256,
        "judge": {"name": judge.name, "provider": request.judge.provider if request.judge else None,
                  "prompt_sha256": judge.prompt_sha256, "rules_version": RULES_VERSION, "fallbacks": judge.fallbacks},
        "bootstrap": {"n": request.n_bootstrap, "seed": request.seed, "unit": "source image",
                      "method": "percentile", "confidence": 0.95},
    }


def score_spd_faith(request: ScoreRequest) -> dict[str, Any]:
    """Score one model's predictions on a dataset; write the score dir and return metrics.json's content.

    The dataset and predictions are read in two passes (issue 34's bounded memory): the records checked keeping
    each pair's expectations (`_expected`: its id and raw digests), the predictions checked keeping each answer's
    place (evaluators/prediction_index.py); then pairs are read again and scored a chunk at a time with their
    answers, each chunk's items written to items.jsonl and folded into the summary's numbers (`metrics.Summary`:
    tens of bytes a pair) on the worker that scored it. The answers' index is dropped before the summary is made.
    An official response file and the pairs it matches are held whole."""
    if request.n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {request.n_bootstrap}.")
    rule_workers = scoring_workers(request.workers)
    if request.dataset is None and request.format == "predictions":
        raise MmfaithError("predictions are scored against a dataset: pass --dataset BUILD_DIR|RELEASE|ORG/NAME.")
    source = (open_spd_source(request.dataset, SCORED_FIELDS, rule_workers, _expected)
              if request.dataset is not None else None)
    official_block: dict[str, Any] | None = None
    if request.format not in official_responses.FORMATS:
        raise MmfaithError(f"--format {request.format!r}: use one of {', '.join(official_responses.FORMATS)}.")
    if request.format == "official" or (request.format == "auto" and official_responses.looks_official(request.predictions)):
        dataset, predictions, official_block = _load_official(request, None if source is None else _held(source))
        source = TwoPass(dataset.dataset_id, dataset.revision, [], held=dataset.pairs)
    elif source is None:
        raise MmfaithError(f"{request.predictions}: not an official response file, so it needs --dataset.")
    else:
        predictions = index_predictions(request.predictions, source.expected, request.from_run, request.drop_stale,
                                        request.repeat, rule_workers)
        source.expected.clear()
    if not predictions.answers:
        raise MmfaithError(f"{request.predictions}: no answer at all ({predictions.n_errors} failed calls); nothing "
                           "to score: fix the cause recorded in meta.error and re-run (the same `mmfaith run` command "
                           "resumes), then score again.")
    out = prepare_out_dir(request.out, "score")  # after the inputs are checked: a refused score writes nothing
    check_score_dir(out, {"--predictions": request.predictions, "--dataset": request.dataset},
                    {"id": source.dataset_id, "revision": source.revision}, predictions.sha256, request.overwrite)
    judge = _judge(request)
    spool, summary = ItemSpool(out), Summary()
    n_answered = n_pairs = 0
    tally = Tally(request.coverage_threshold)
    compared: tuple[list[Judgement], list[Judgement], list[dict[str, bool]]] = ([], [], [])
    chunks_of: TwoPass[SpdPair, Any] = source  # a name the closure below reads (never None from here)

    def score_chunk(chunk: tuple[int, Any]) -> tuple[int, ScoredChunk]:
        start, payload = chunk
        pairs = chunks_of.items(payload)
        held, failed = chunk_answers(predictions, range(start, start + len(pairs)))
        read = replace(predictions, answers=held, failed=failed)
        answers = [{probe: held.get((pair.id, probe), Answer(None)) for probe in PROBES} for pair in pairs]
        cases = [judge_case(pair.record, by_probe) for pair, by_probe in zip(pairs, answers)]
        judgements = judge.judge_all(cases)
        chunk_items = [score_item(pair.record, pair.source_key, by_probe, case, judgement)
                       for pair, by_probe, case, judgement in zip(pairs, answers, cases, judgements)]
        agreement = (RuleJudge().judge_all(cases), judgements,
                     [{probe: case.responses[probe] is not None for probe in CLAIM_PROBES} for case in cases]
                     ) if request.judge_agreement else None
        return len(pairs), ScoredChunk(spooled(chunk_items), Summary.of(chunk_items),
                                       answer_tally(chunk_items, read, request.coverage_threshold),
                                       sum(answer.response is not None for by_probe in answers
                                           for answer in by_probe.values()), agreement)

    # Chunks of pairs scored on forked workers (the rule judge; an LLM judge's calls run on its own threads, here)
    workers = rule_workers if isinstance(judge, RuleJudge) else 1
    for size, scored in ordered_map(score_chunk, source.chunks(request.chunk), workers):
        spool.add(scored.items)
        summary.extend(scored.summary)
        tally.add_tally(scored.tally)
        n_answered += scored.n_answered
        n_pairs += size
        if scored.agreement is not None:
            for held, part in zip(compared, scored.agreement):
                held.extend(part)
    agreement = claim_agreement(*compared) if request.judge_agreement else None
    provenance = _provenance(request, source, predictions, judge)
    predictions = replace(predictions, answers={}, failed=frozenset())  # the answers' index, dropped: every pair read
    metrics: dict[str, Any] = {"definitions_version": DEFINITIONS_VERSION, "provenance": provenance,
                               **summary.result(request.n_bootstrap, request.seed)}
    metrics["counts"].update(n_errors=predictions.n_errors, n_answered=n_answered,
                             answered_share=round(n_answered / (n_pairs * len(PROBES)), 6))
    metrics["answers"] = tally.to_json()
    if predictions.n_stale:
        metrics["counts"]["n_stale"] = predictions.n_stale
    if official_block is not None:
        metrics["official"] = official_block
        official_responses.apply_not_computable(metrics)
    if agreement is not None:
        metrics["judge_agreement"] = agreement

    def write_report(scores: dict[str, Any], folder: Path) -> None:
        write_score_report(scores, folder)
        if official_block is not None:
            with open(folder / "report.md", "a", encoding="utf-8") as report:
                report.write(official_responses.comparison_markdown(scores))

    publish_scores(out, spool, metrics, write_report)
    return metrics


def _held(source: TwoPass[SpdPair, Any]) -> SpdDataset:
    """Every pair of a two-pass dataset, held (an official response file's rows are matched to them)."""
    return SpdDataset([pair for _, payload in source.chunks(JUDGE_CHUNK) for pair in source.items(payload)],
                      source.dataset_id, source.revision)


def _load_official(request: ScoreRequest,
                   dataset: SpdDataset | None) -> tuple[SpdDataset, Predictions, dict[str, Any]]:
    """An official response file (evaluators/spd_faith/official_responses.py): the matched pairs, their answers
    and metrics.json's `official` block. Without a dataset the file's ground truth is the gold (no image is
    read in scoring: the pairs' image paths are the response file itself)."""
    official = official_responses.read_official(request.predictions)
    if dataset is None:
        pairs = [SpdPair(record, request.predictions, request.predictions)
                 for record in official_responses.gold_from_file(official)]
        dataset = SpdDataset(pairs, f"official-response-file:{request.predictions.name}", official.sha256[:16])
        gold, disagreements = "file", []
    else:
        pairs, disagreements = official_responses.match_rows(request.predictions, official, dataset.pairs)
        gold = "dataset"
    answers = {(pair.id, probe): answer for pair, row in zip(pairs, official.rows)
               for probe, answer in official_responses.answers_of(row).items() if answer.response is not None}
    if not answers:
        raise MmfaithError(f"{request.predictions}: no row holds an answer (predicted_num, structured_output, "
                           "raw_response, response_same or response_different); nothing to score.")
    return (SpdDataset(pairs, dataset.dataset_id, dataset.revision),
            Predictions(answers, official.model, 0, 0, official.sha256),
            official_responses.official_block(official, disagreements, len(pairs), gold))
