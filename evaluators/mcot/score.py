"""`mmfaith score mcot`: predictions of the four probes -> metrics.json, items.jsonl, report.md, plots.

Predictions are read by the shared reader (evaluators/predictions.py; a submission of traces is
scored the same way, but its replays can only come from `mmfaith run`). Each item's outcome
(`metrics.ItemOutcome`) comes from its `trace` line (meta.trace: the answer, the crops, the tool
calls) and its replay lines (meta.answer, meta.injection, meta.skipped); the judge labels each
visual item. The score dir is checked and written whole (evaluators/score_dir.py); the same inputs
give the same bytes (the bootstrap is seeded; LLM judge answers are cached under the cache dir).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith import __version__, families
from mmfaith.clients import ModelEndpoint
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.mcot.agent import trace_regions
from mmfaith.evaluators.mcot.judge import COVERAGE, GeometricJudge, JudgeCase, LlmJudge, agreement
from mmfaith.evaluators.mcot.metrics import DEFINITIONS_VERSION, ItemOutcome, summarize
from mmfaith.evaluators.mcot.protocol import answer_letter, final_answer
from mmfaith.evaluators.mcot.replay import PROBES, REPLAYS
from mmfaith.evaluators.predictions import read_predictions
from mmfaith.evaluators.score_dir import check_score_dir, publish_scores
from mmfaith.jsonl import write_atomic
from mmfaith.loaders.mcot.dataset import McotItem, open_mcot_dataset
from mmfaith.outdir import prepare_out_dir


@dataclass(frozen=True)
class McotScoreRequest:
    dataset: Path
    predictions: Path
    out: Path
    judge: str = "geometric"
    judge_base_url: str | None = None
    judge_api_key_env: str | None = None
    judge_agreement: str | None = None
    judge_workers: int = 4
    coverage: float = COVERAGE
    from_run: bool = False
    n_bootstrap: int = 1000
    seed: int = 0
    overwrite: bool = False
    drop_stale: bool = False
    repeat: int = 0
    """Which repeat of a `run --repeats N` to score."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> McotScoreRequest:
        if not args.dataset:
            raise MmfaithError("score mcot needs --dataset (the build dir, release folder or Hub id that was run).")
        return cls(dataset=Path(args.dataset), predictions=args.predictions, out=args.out, judge=args.judge,
                   judge_base_url=args.judge_base_url, judge_api_key_env=args.judge_api_key_env,
                   judge_agreement=args.judge_agreement, judge_workers=args.judge_workers, coverage=COVERAGE if args.coverage is None else args.coverage,
                   from_run=args.from_run, n_bootstrap=args.bootstrap, seed=args.seed, overwrite=args.overwrite,
                   drop_stale=args.drop_stale, repeat=args.repeat)

    def make_judge(self, name: str) -> GeometricJudge | LlmJudge:
        if name == "geometric":
            if not 0 < self.coverage <= 1:
                raise MmfaithError(f"--coverage must be in (0, 1], not {self.coverage}.")
            return GeometricJudge(self.coverage)
        return LlmJudge(ModelEndpoint("openai", name, self.judge_base_url, self.judge_api_key_env))


def outcome(item: McotItem, lines: dict[str, dict[str, Any]], verdict: dict[str, Any] | None) -> ItemOutcome:
    """One item's outcome from its answered lines (probe -> line) and the judge's verdict."""
    record = item.record
    trace_line = lines.get("trace")
    trace = (trace_line or {}).get("meta", {}).get("trace") if trace_line else None
    if trace_line is not None and trace is None:  # a submitted final answer without a trace
        letter = answer_letter(final_answer(trace_line["response"]), record["options"])
    else:
        letter = trace.get("answer") if trace else None
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
    calls = sum(len(turn["tool_calls"]) for turn in trace["turns"]) if trace else 0
    return ItemOutcome(id=item.id, category=record["category"], source_key=item.source_key,
                       trace_answered=trace_line is not None, correct=correct, visual=visual,
                       text_changed=text_changed, tool_calls=calls,
                       crop_region_size=None if size is None else round(size, 6),
                       reliable=None if verdict is None else verdict["reliable"],
                       sufficient=None if verdict is None else verdict["sufficient"], answers=answers)


def score_mcot(request: McotScoreRequest) -> dict[str, Any]:
    """Score one model's predictions on a dataset; write the score dir and return metrics.json's content."""
    if request.n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {request.n_bootstrap}.")
    dataset = open_mcot_dataset(request.dataset)
    if request.judge_workers < 1:
        raise MmfaithError(f"--judge-workers must be 1 or more, not {request.judge_workers}.")
    judge = request.make_judge(request.judge)
    second = request.make_judge(request.judge_agreement) if request.judge_agreement else None
    read = read_predictions(request.predictions, {item.id: PROBES for item in dataset.items}, request.from_run,
                            {item.id: {item.record["image_sha256"]} for item in dataset.items}, request.drop_stale,
                            request.repeat)
    if not read.answered:
        raise MmfaithError(f"{request.predictions}: no answer at all ({read.n_errors} failed calls); nothing to score: "
                           "fix the cause recorded in meta.error and re-run (the same `mmfaith run` command resumes).")
    out = prepare_out_dir(request.out, "score")
    dataset_key = {"id": dataset.dataset_id, "revision": dataset.revision}
    check_score_dir(out, {"--predictions": request.predictions, "--dataset": request.dataset}, dataset_key,
                    read.sha256, request.overwrite)
    lines_of = [{probe: read.answered[(item.id, probe)] for probe in PROBES if (item.id, probe) in read.answered}
                for item in dataset.items]
    cases = [_case(item, lines) for item, lines in zip(dataset.items, lines_of)]
    verdicts = _judge_all(judge, cases, request.judge_workers)
    items = [outcome(item, lines, verdict) for item, lines, verdict in zip(dataset.items, lines_of, verdicts)]
    seconds = []
    if second is not None:
        seconds = [(a, b) for a, b in zip(verdicts, _judge_all(second, cases, request.judge_workers)) if a is not None]
    metrics: dict[str, Any] = {
        "definitions_version": DEFINITIONS_VERSION,
        "provenance": {"family": "mcot", "mmfaith_version": __version__, "dataset": dataset_key, "model": read.model,
                       "predictions_sha256": read.sha256,
                       "predictions_mode": "run" if request.from_run else "submission", "repeat": request.repeat,
                       "judge": judge.name, "bootstrap": {"n": request.n_bootstrap, "seed": request.seed,
                                                          "unit": "source image", "method": "percentile",
                                                          "confidence": 0.95}},
        **summarize(items, request.n_bootstrap, request.seed),
    }
    metrics["counts"] = {**metrics["overall"]["counts"], "n_errors": read.n_errors, "n_stale": read.n_stale}
    if second is not None:
        metrics["judge_agreement"] = {"judges": [judge.name, second.name],
                                      **agreement([a for a, _ in seconds], [b for _, b in seconds])}
    publish_scores(out, [{**item.to_json(), "judge": verdict} for item, verdict in zip(items, verdicts)], metrics,
                   write_report)
    return metrics


def _judge_all(judge: GeometricJudge | LlmJudge, cases: list[JudgeCase | None], workers: int) -> list[dict[str, Any] | None]:
    """Every case's verdict in order (None where there is no case), `workers` judge calls at once."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda case: judge.judge(case) if case is not None else None, cases))


def _case(item: McotItem, lines: dict[str, dict[str, Any]]) -> JudgeCase | None:
    trace = lines.get("trace", {}).get("meta", {}).get("trace")
    if not trace or not trace["crops"]:
        return None
    return JudgeCase(item.record, item.image_path, tuple(trace_regions(trace)), trace.get("answer"))


def write_report(metrics: dict[str, Any], out: Path) -> None:
    """report.md (headline table, ATEs with McNemar, per category, counts) and the plots."""
    from mmfaith.evaluators.plots import ValueAxis, bar_chart, metric_chart, save_png
    from mmfaith.evaluators.report_tables import fmt, fmt_ci, md_table

    family = families.get("mcot")
    overall, model = metrics["overall"], metrics["provenance"]["model"]
    lines = [f"# MCoT scores: {model}", "", f"Judge: {metrics['provenance']['judge']}. Definitions: docs/mcot.md "
             f"({metrics['definitions_version']}).", ""]
    rows = []
    for metric in family.metrics:
        detail = overall["ate"]["text" if metric.key == "ATE_text" else "visual"] if metric.key.startswith("ATE") else None
        interval = detail["ci95"] if detail else overall["ci95"].get(metric.key)
        value = fmt_ci(overall[metric.key], interval)
        rows.append([metric.name, value, metric.meaning])
    lines += md_table(["metric", "value", "meaning"], rows) + [""]
    ate_rows = [[name, str(d["n"]), str(d["b"]), str(d["c"]), fmt(d["value"]),
                 "n/a" if d["p_mcnemar"] is None else f"{d['p_mcnemar']:.4g}",
                 "n/a" if d["p_clustered"] is None else f"{d['p_clustered']:.4g}"]
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
              f"injector left unchanged (left out of ATE_text); {counts['n_errors']} failed calls.", ""]
    if "judge_agreement" in metrics:
        agree = metrics["judge_agreement"]
        lines += ["## Judge agreement", "", f"{' vs '.join(agree['judges'])}: reliability "
                  f"{fmt(agree['reliable']['agreement'])} (n={agree['reliable']['n']}), sufficiency "
                  f"{fmt(agree['sufficient']['agreement'])} (n={agree['sufficient']['n']}).", ""]
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
