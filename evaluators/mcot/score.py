"""`mmfaith score mcot`: predictions of the four probes -> metrics.json, items.jsonl, report.md, plots.

Predictions are read by the shared reader (evaluators/predictions.py; a submission of traces is
scored the same way, but its replays can only come from `mmfaith run`). Each item's outcome
(`metrics.ItemOutcome`) comes from its `trace` line (meta.trace: the answer, the crops, the tool
calls) and its replay lines (meta.answer, meta.injection.changed); the judge labels each
visual item. The score dir is checked and written whole (evaluators/score_dir.py); the same inputs
give the same bytes (the bootstrap is seeded; LLM judge answers are cached under the cache dir).

The dataset and predictions are read in two passes (issue 34's bounded memory): the records are checked and
each item's expectations kept compactly (loaders/mcot/dataset.py `open_mcot_source`, evaluators/prediction_index.py
`ItemTable`), the predictions checked and each answer's place kept (`AnswerIndex`); then questions are read again
and scored QUESTION_CHUNK at a time with their answered lines (`score_chunk`: outcomes, judge verdicts, grounding,
the items.jsonl lines redacted, the kept summary fields, the answer tally, the position-bias picks and the
CircularEval rights), on `workers` processes forked after the first pass (mmfaith/ordered_pool.py), merged in
dataset order, so the files are the same bytes whatever the number of workers and the chunk size. An LLM judge or reader (network calls on threads, and the reader's agreement counts) keeps
one process.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mmfaith import __version__, families
from mmfaith.clients import ModelEndpoint
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.circular import (circular_correct, controls_lines, labelled_position_bias, original_label,
                                         rotate_options)
from mmfaith.evaluators.mcot.agent import trace_regions
from mmfaith.evaluators.mcot.judge import (COVERAGE, MAX_CROP_SHARE, GeometricJudge, JudgeCase, LlmJudge, agreement,
                                           grounding)
from mmfaith.evaluators.mcot.metrics import (DEFINITIONS_VERSION, SUMMARY_FIELDS, ItemOutcome, SummaryItem,
                                             summarize, summary_item)
from mmfaith.evaluators.answer_llm import ChoiceReader
from mmfaith.evaluators.answers import last_tag
from mmfaith.evaluators.coverage import Tally, status_of
from mmfaith.evaluators.mcot.protocol import answer_letter
from mmfaith.evaluators.mcot.replay import PROBES, REPLAYS
from mmfaith.evaluators.mcot.run import item_shows, rotated_traces
from mmfaith.evaluators.prediction_index import AnswerIndex, ItemTable
from mmfaith.evaluators.predictions import PredictionSet, read_predictions, shown_digest
from mmfaith.evaluators.score_settings import ScoreSettings, shared_score_settings
from mmfaith.evaluators.score_dir import ItemSpool, SpooledChunk, check_score_dir, publish_scores, spooled
from mmfaith.jsonl import write_atomic
from mmfaith.loaders.mcot.dataset import McotItem, open_mcot_source
from mmfaith.ordered_pool import ordered_map, scoring_workers
from mmfaith.outdir import prepare_out_dir


SCORED_FIELDS = ("id", "category", "question", "options", "answer", "image_sha256", "width", "height", "targets")
"""What scoring reads of a record (the loader keeps only these: mmfaith/records.py)."""
QUESTION_CHUNK = 4096
"""Questions scored at a time (the unit of work of a worker process; the files are the same whatever the size)."""
Lines = dict[str, dict[str, Any]]
"""An item's answered prediction lines (kept: `scored_meta`), by probe."""


@dataclass(frozen=True, kw_only=True)
class McotScoreRequest(ScoreSettings):
    dataset: Path
    judge: str = "geometric"
    judge_base_url: str | None = None
    judge_api_key_env: str | None = None
    judge_agreement: str | None = None
    judge_workers: int = 4
    coverage: float = COVERAGE
    max_crop_share: float = MAX_CROP_SHARE
    extract: str = "default"
    reader: ModelEndpoint | None = None
    workers: int | None = None
    """Processes scoring chunks of questions side by side (mmfaith/ordered_pool.py); None: the usable cores. The
    files are the same whatever the number."""
    chunk: int = QUESTION_CHUNK

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> McotScoreRequest:
        from mmfaith.cli_options import reader_endpoint

        if not args.dataset:
            raise MmfaithError("score mcot needs --dataset (the build dir, release folder or Hub id that was run).")
        return cls(**shared_score_settings(args), dataset=Path(args.dataset), judge=args.judge,
                   judge_base_url=args.judge_base_url, judge_api_key_env=args.judge_api_key_env,
                   judge_agreement=args.judge_agreement, judge_workers=args.judge_workers,
                   coverage=COVERAGE if args.coverage is None else args.coverage, max_crop_share=args.max_crop_share,
                   extract=args.extract, reader=reader_endpoint(args), workers=args.workers)

    def make_judge(self, name: str) -> GeometricJudge | LlmJudge:
        if name == "geometric":
            if not 0 < self.coverage <= 1:
                raise MmfaithError(f"--coverage must be in (0, 1], not {self.coverage}.")
            return GeometricJudge(self.coverage, self.max_crop_share)
        return LlmJudge(ModelEndpoint("openai", name, self.judge_base_url, self.judge_api_key_env))


def trace_answer(reply: str | None, options: list[dict[str, str]], reader: ChoiceReader) -> str | None:
    """A trace's option label (a free-form item: its answer tag's text)."""
    return reader.choice(reply, options) if options else answer_letter(reply, options)


def scored_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """A prediction line's meta as scoring reads it (evaluators/predictions.py), and no more: `no_image` (the
    reader checks it), a replay's `answer` and whether its injection `changed` the text, and a trace's answer, its
    crops' boxes, its last turn's text (`reply`: what its answer is read from) and its number of tool calls. A
    trace is most of a line's memory (its tool calls' arguments, boxes and raw text); a replay's kept meta is one
    of a few equal objects (held once: mmfaith/records.py)."""
    kept = {name: meta[name] for name in ("answer", "no_image") if name in meta}
    injection = meta.get("injection")
    if isinstance(injection, dict):
        kept["injection"] = {"changed": bool(injection.get("changed"))}
    trace = meta.get("trace")
    if isinstance(trace, dict):
        turns = trace.get("turns") or []
        kept["trace"] = {"answer": trace.get("answer"),
                         "crops": [{"box": crop["box"]} for crop in trace.get("crops") or []],
                         "reply": turns[-1].get("text") if turns else None,
                         "tool_calls": sum(len(turn.get("tool_calls") or []) for turn in turns)}
    return kept


def trace_reply(trace_line: dict[str, Any]) -> str | None:
    """The reply a trace line's answer is read from: its last turn's text (`scored_meta`; a submitted final answer
    without a trace: the response)."""
    trace = (trace_line.get("meta") or {}).get("trace")
    return trace_line["response"] if trace is None else trace["reply"]


def outcome(item: McotItem, lines: Lines, verdict: dict[str, Any] | None,
            grounding: dict[str, Any] | None = None, reader: ChoiceReader | None = None) -> ItemOutcome:
    """One item's outcome from its answered lines (probe -> line), the judge's verdict, the crops'
    grounding (judge.grounding) and the trace answer's reader (default: the rules)."""
    record = item.record
    trace_line = lines.get("trace")
    trace = (trace_line or {}).get("meta", {}).get("trace") if trace_line else None
    letter = None if trace_line is None else trace_answer(trace_reply(trace_line), record["options"],
                                                              reader or ChoiceReader())
    correct = {"trace": int(letter is not None and letter == record["answer"])}
    answers = {"trace": letter}
    visual = bool(trace and trace["crops"])
    text_changed = False
    if visual:
        for probe in REPLAYS:
            answers[probe] = lines.get(probe, {}).get("meta", {}).get("answer")
            correct[probe] = int(answers[probe] is not None and answers[probe] == record["answer"])
        text_changed = bool(lines.get("replay_text", {}).get("meta", {}).get("injection", {}).get("changed"))
    width, height = item.size
    size = (sum(r.area for r in trace_regions(trace)) / (width * height)) if visual and trace else None
    calls = trace["tool_calls"] if trace else 0
    return ItemOutcome(id=item.id, category=record["category"], source_key=item.source_key,
                       trace_answered=trace_line is not None, correct=correct, visual=visual,
                       text_changed=text_changed, tool_calls=calls,
                       crop_region_size=None if size is None else round(size, 6),
                       reliable=None if verdict is None else verdict["reliable"],
                       sufficient=None if verdict is None else verdict["sufficient"], answers=answers,
                       grounding_iou=None if grounding is None else grounding["iou"],
                       target_hit=None if grounding is None else grounding["hit"])


@dataclass(frozen=True)
class ScoredChunk:
    """What scoring a chunk of questions gives back (on a worker process): the items' lines and kept summary fields,
    the chunk's answer tally, the trace answers of its multiple-choice items with their golds and their options'
    labels (`labelled_position_bias`), each rotated item's (right in the first order, right in every rotation)
    (`circular_block`) and, with a second judge, the two verdicts of each judged item."""

    items: SpooledChunk
    tally: Tally
    picks: list[str | None]
    golds: list[str]
    labels: set[str]
    circular: list[tuple[bool, bool]]
    verdicts: list[tuple[dict[str, Any], dict[str, Any]]]


@dataclass(frozen=True)
class Scoring:
    """What scoring a chunk reads: its items, their predictions, the judges, the trace answers' reader and the
    settings (`McotScoreRequest`)."""

    items: list[McotItem]
    read: PredictionSet
    judge: GeometricJudge | LlmJudge
    second: GeometricJudge | LlmJudge | None
    reader: ChoiceReader
    request: McotScoreRequest

    def lines(self, item: McotItem) -> Lines:
        answered = self.read.answered
        return {probe: answered[(item.id, probe)] for probe in PROBES if (item.id, probe) in answered}


def chunk_workers(judge: GeometricJudge | LlmJudge, second: GeometricJudge | LlmJudge | None, reader: ChoiceReader,
                  request: McotScoreRequest) -> int:
    """The processes that score chunks: one with an LLM judge or reader (threads, network clients, the reader's
    agreement counts), else `--workers` (mmfaith/ordered_pool.py)."""
    local = isinstance(judge, GeometricJudge) and not isinstance(second, LlmJudge) and reader.endpoint is None
    return scoring_workers(request.workers) if local else 1


def score_chunk(scoring: Scoring) -> ScoredChunk:
    """`scoring.items` scored (module docstring)."""
    request = scoring.request
    items = scoring.items
    lines_of = [scoring.lines(item) for item in items]
    cases = [_case(item, lines) for item, lines in zip(items, lines_of)]
    verdicts = _judge_all(scoring.judge, cases, request.judge_workers)
    outcomes = [outcome(item, lines, verdict, None if case is None else grounding(case, request.max_crop_share),
                        scoring.reader)
                for item, lines, verdict, case in zip(items, lines_of, verdicts, cases)]
    compared = []
    if scoring.second is not None:
        compared = [(a, b) for a, b in zip(verdicts, _judge_all(scoring.second, cases, request.judge_workers))
                    if a is not None]
    chosen = [(item, lines) for item, lines in zip(items, lines_of) if item.record["options"]]
    picks = [((lines.get("trace") or {}).get("meta") or {}).get("trace", {}).get("answer") for _, lines in chosen]
    rights = [right for item, scored in zip(items, outcomes)
              if (right := circular_rights(item, scoring.read, scoring.reader, scored)) is not None]
    return ScoredChunk(spooled(({**scored.to_json(), "judge": verdict} for scored, verdict in zip(outcomes, verdicts)),
                               SUMMARY_FIELDS),
                       answer_tally(items, scoring.read, request.coverage_threshold,
                                    [scored.answers["trace"] for scored in outcomes]),
                       picks, [item.record["answer"] for item, _ in chosen],
                       {option["label"] for item, _ in chosen for option in item.record["options"]}, rights, compared)


def _expected(item: McotItem) -> tuple[str, tuple[str, ...], str, str]:
    """What an item's prediction lines are checked against (evaluators/prediction_index.py `ItemTable`): its id,
    every probe a run may have asked (a circular run's rotated traces too; the scores use those it did ask), its
    image and its shown digest."""
    return (item.id, PROBES + tuple(probe for probe, _ in rotated_traces(item, True)), item.record["image_sha256"],
            shown_digest(item_shows(item)))


def score_mcot(request: McotScoreRequest) -> dict[str, Any]:
    """Score one model's predictions on a dataset; write the score dir and return metrics.json's content."""
    if request.n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {request.n_bootstrap}.")
    workers = scoring_workers(request.workers)  # a bad --workers is refused before anything is read
    source = open_mcot_source(request.dataset, SCORED_FIELDS, workers, _expected)
    if request.judge_workers < 1:
        raise MmfaithError(f"--judge-workers must be 1 or more, not {request.judge_workers}.")
    table = ItemTable()
    for item_id, probes, image, shown in source.expected:
        table.add(item_id, probes, [image], shown)
    source.expected.clear()
    # Lines are parsed on `workers` processes, forked before any judge or reader client is made.
    read = read_predictions(request.predictions, table.probes, request.from_run, table.images, request.drop_stale,
                            table.shown, request.repeat, scored_meta, workers=workers, index=table)
    judge = request.make_judge(request.judge)
    second = request.make_judge(request.judge_agreement) if request.judge_agreement else None
    if not read.answered:
        raise MmfaithError(f"{request.predictions}: no answer at all ({read.n_errors} failed calls); nothing to score: "
                           "fix the cause recorded in meta.error and re-run (the same `mmfaith run` command resumes).")
    out = prepare_out_dir(request.out, "score")
    dataset_key = {"id": source.dataset_id, "revision": source.revision}
    check_score_dir(out, {"--predictions": request.predictions, "--dataset": request.dataset}, dataset_key,
                    read.sha256, request.overwrite)
    if not 0 < request.max_crop_share <= 1:
        raise MmfaithError(f"--max-crop-share must be in (0, 1], not {request.max_crop_share}.")
    reader = ChoiceReader(request.reader, request.extract)
    answers = read.answered
    assert isinstance(answers, AnswerIndex)

    def score(chunk: tuple[int, Any]) -> ScoredChunk:
        start, payload = chunk
        items = source.items(payload)
        answered, failed = answers.lines(range(start, start + len(items)), scored_meta)
        return score_chunk(Scoring(items, replace(read, answered=answered, failed=failed), judge, second, reader,
                                   request))

    spool, tally = ItemSpool(out, SUMMARY_FIELDS), Tally(request.coverage_threshold)
    items: list[SummaryItem] = []
    picks: list[str | None] = []
    golds: list[str] = []
    labels: set[str] = set()
    rights: list[tuple[bool, bool]] = []
    compared: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for scored in ordered_map(score, source.chunks(request.chunk), chunk_workers(judge, second, reader, request)):
        items.extend(map(summary_item, spool.add(scored.items)))
        tally.add_tally(scored.tally)
        picks += scored.picks
        golds += scored.golds
        labels |= scored.labels
        rights += scored.circular
        compared += scored.verdicts
    metrics: dict[str, Any] = {
        "definitions_version": DEFINITIONS_VERSION,
        "provenance": {"family": "mcot", "mmfaith_version": __version__, "dataset": dataset_key, "model": read.model,
                       "predictions_sha256": read.sha256, "no_image": read.no_image,
                       "predictions_mode": "run" if request.from_run else "submission", "repeat": request.repeat,
                       "judge": judge.name, "max_crop_share": request.max_crop_share,
                       "bootstrap": {"n": request.n_bootstrap, "seed": request.seed, "unit": "source image",
                                     "method": "percentile", "confidence": 0.95}},
        **summarize(items, request.n_bootstrap, request.seed),
    }
    metrics["counts"] = {**metrics["overall"]["counts"], "n_errors": read.n_errors, "n_stale": read.n_stale}
    metrics["answers"] = tally.to_json()
    if reader.endpoint is not None:
        metrics["reader"] = reader.agreement()
    metrics["position_bias"] = labelled_position_bias(picks, golds, labels)
    metrics["circular"] = circular_block(rights)
    if second is not None:
        metrics["judge_agreement"] = {"judges": [judge.name, second.name],
                                      **agreement([a for a, _ in compared], [b for _, b in compared])}
    publish_scores(out, spool, metrics, write_report)
    return metrics


def answer_tally(items: list[McotItem], read: PredictionSet, threshold: float,
                 trace_answers: list[str | None]) -> Tally:
    """Every expected answer's status (evaluators/coverage.py): each item's trace (as read: `trace_answers`, one per
    item), and the three replays of a trace with a crop (the others are not asked). Paper format: an <answer> tag or
    \\boxed{} in the answering reply (the prompt's format, after DeepEyes)."""
    tally = Tally(threshold)
    for item, trace_answer_ in zip(items, trace_answers):
        trace_line = read.answered.get((item.id, "trace"))
        reply = None if trace_line is None else trace_reply(trace_line)
        tally.add(status_of(None if trace_line is None else {"response": reply}, (item.id, "trace") in read.failed,
                            trace_answer_),
                  None if not reply else last_tag(reply) is not None)
        trace = None if trace_line is None else (trace_line.get("meta") or {}).get("trace")
        if not trace or not trace["crops"]:
            continue
        for probe in REPLAYS:
            line = read.answered.get((item.id, probe))
            tally.add(status_of(line, (item.id, probe) in read.failed,
                                None if line is None else line["meta"].get("answer")))  # replies continue a trace
    return tally


def circular_rights(item: McotItem, read: PredictionSet, reader: ChoiceReader,
                    scored: ItemOutcome) -> tuple[bool, bool] | None:
    """(right in the first order, right in every rotation: evaluators/circular.py) of an item whose trace was also
    run in a further rotation of the options (`run --circular`); None for an item without one answered."""
    record = item.record
    rotated = rotated_traces(item, True)
    lines = [read.answered.get((item.id, probe)) for probe, _ in rotated]
    if not rotated or all(line is None for line in lines):
        return None
    rights = [scored.correct["trace"] == 1]
    for (_, k), line in zip(rotated, lines):
        shown = None if line is None else trace_answer(trace_reply(line), rotate_options(record["options"], k), reader)
        rights.append(original_label(record["options"], k, shown) == record["answer"])
    return rights[0], circular_correct(rights)


def circular_block(rights: list[tuple[bool, bool]]) -> dict[str, Any] | None:
    """metrics.json's `circular`: over the multiple-choice items whose trace was also run in every further
    rotation of the options (`run --circular`; `circular_rights`, in dataset order), `accuracy_trace` (first
    order) beside `accuracy_circular` (right in every rotation); None for a run without rotations."""
    if not rights:
        return None
    return {"trace": {"n_items": len(rights), "accuracy": round(sum(first for first, _ in rights) / len(rights), 6),
                      "accuracy_circular": round(sum(every for _, every in rights) / len(rights), 6)}}


def _judge_all(judge: GeometricJudge | LlmJudge, cases: list[JudgeCase | None], workers: int) -> list[dict[str, Any] | None]:
    """Every case's verdict in order (None where there is no case); an LLM judge's calls `workers` at once."""
    if isinstance(judge, GeometricJudge):
        return [None if case is None else judge.judge(case) for case in cases]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda case: judge.judge(case) if case is not None else None, cases))


def _case(item: McotItem, lines: Lines) -> JudgeCase | None:
    trace = lines.get("trace", {}).get("meta", {}).get("trace")
    if not trace or not trace["crops"]:
        return None
    return JudgeCase(item.record, item.image_path, tuple(trace_regions(trace)), trace.get("answer"))


def write_report(metrics: dict[str, Any], out: Path) -> None:
    """report.md (headline table, ATEs with McNemar, per category, counts) and the plots."""
    from mmfaith.evaluators.plots import ValueAxis, bar_chart, metric_chart, save_png
    from mmfaith.evaluators import coverage
    from mmfaith.evaluators.report_tables import fmt, fmt_ci, fmt_p, md_table

    family = families.get("mcot")
    overall, model = metrics["overall"], metrics["provenance"]["model"]
    lines = [f"# MCoT scores: {model}", "", f"Judge: {metrics['provenance']['judge']}. Definitions: docs/mcot.md "
             f"({metrics['definitions_version']}).", ""]
    rows = []
    for metric in family.metrics:
        detail = overall["ate"]["text" if metric.key == "ATE_text" else "visual"] if metric.key.startswith("ATE") else None
        interval = detail["ci95"] if detail else overall["ci95"].get(metric.key)
        value = fmt_ci(overall[metric.key], interval, metric.undefined_when)
        rows.append([metric.name, value, metric.meaning])
    lines += md_table(["metric", "value", "meaning"], rows) + [""]
    ate_rows = [[name, str(d["n"]), str(d["b"]), str(d["c"]), fmt(d["value"]),
                 fmt_p(d["p_mcnemar"], "no item on both sides"),
                 fmt_p(d["p_clustered"], "no item on both sides")]
                for name, d in (("ATE_text", overall["ate"]["text"]), ("ATE_visual", overall["ate"]["visual"]))]
    lines += ["## Interventions (section 4.1)", "", "b: right before, wrong after the intervention; c: the reverse.", ""]
    lines += md_table(["effect", "items", "b", "c", "ATE", "McNemar p (exact)", "clustered p (Durkalski)"],
                      ate_rows) + [""]
    lines += ["## By category", ""]
    lines += md_table(["category", "items", "accuracy (trace)", "ATE_text", "ATE_visual", "reliability", "sufficiency"],
                      [[name, str(b["counts"]["items"]), fmt(b["accuracy_trace"]), fmt(b["ATE_text"]),
                        fmt(b["ATE_visual"]), fmt(b["reliability"]), fmt(b["sufficiency"])]
                       for name, b in metrics["by_category"].items()]) + [""]
    counts = metrics["counts"]
    lines += ["## Counts", "", f"{counts['items']} items; {counts['traces_answered']} traces answered; "
              f"{counts['visual']} with at least one crop (the intervention and judge metrics' items); "
              f"{counts['no_tool_call']} without a tool call (left out); {counts['text_unchanged']} whose text the "
              f"injector left unchanged (left out of ATE_text); {counts['n_errors']} failed calls; items left out of "
              f"ATE_text / ATE_visual for an unanswered replay: {overall['ate']['text']['left_out']} / "
              f"{overall['ate']['visual']['left_out']}.", "",
              "## Grounding", "", f"grounding_iou {fmt(overall['grounding_iou'])} (best IoU of a crop with a target box, "
              f"mean over {counts['grounded']} traces); target_hit_rate {fmt(overall['target_hit_rate'])} (a crop of at "
              f"most {metrics['provenance']['max_crop_share']:g} of the image covering half a target box).", "",
              *coverage.markdown(metrics["answers"])]
    if "judge_agreement" in metrics:
        agree = metrics["judge_agreement"]
        lines += ["## Judge agreement", "", f"{' vs '.join(agree['judges'])}: reliability "
                  f"{fmt(agree['reliable']['agreement'])} (n={agree['reliable']['n']}), sufficiency "
                  f"{fmt(agree['sufficient']['agreement'])} (n={agree['sufficient']['n']}).", ""]
    lines += controls_lines([model], [metrics])
    lines += ["Plots: metrics.png, tool_call_count.png, crop_region_size.png.", ""]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    shown = [m for m in family.metrics if m.kind != "count"]
    save_png(metric_chart(f"MCoT: {model}", shown, {model: {m.key: overall[m.key] for m in shown}}), out / "metrics.png")
    for key, xlabel in (("tool_call_count", "tool calls in the trace"), ("crop_region_size", "crop area / image area")):
        histogram = metrics["distributions"][key]
        save_png(bar_chart(f"{family.metric(key).name} per item: {model}", list(histogram),
                           {"items": [float(v) for v in histogram.values()]},
                           ValueAxis("items", 0.0, None, integer=True, decimals=0), xlabel=xlabel),
                 out / f"{key}.png")
