"""MCoT's own options of the shared `run` and `score` verbs, and the hooks the registry names."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stage modules load when a hook runs
    from mmfaith.evaluators.run_engine import EvalDataset, ProbePlan, ReferenceModel

RUN_DESCRIPTION = ("Run the zoom-in agent on every MCoT item (probe trace), then replay each trace unchanged "
                   "(replay_none), with mistakes injected into its text (replay_text) and with its crops replaced by "
                   "noise (replay_visual).")
SCORE_DESCRIPTION = ("Accuracy per probe, ATE_text and ATE_visual with exact McNemar p-values and bootstrap CIs, "
                     "reliability and sufficiency (a judge), crop region size and tool-call count.")


def open_dataset(source: Path | str) -> EvalDataset:
    from mmfaith.loaders.mcot.dataset import open_mcot_dataset

    return open_mcot_dataset(Path(source))


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The agent loop's protocol, coordinates and turn limit; the replays' continuation and injector."""
    from mmfaith.evaluators.mcot.boxes import COORDS
    from mmfaith.evaluators.mcot.protocol import CONTINUATIONS, PROTOCOLS

    parser.description = RUN_DESCRIPTION
    agent = parser.add_argument_group("the agent loop")
    agent.add_argument("--tool-protocol", choices=PROTOCOLS, default="tags", dest="protocol",
                       help="tags: <tool_call>{...}</tool_call> in the text (DeepEyes, Pixel-Reasoner); functions: "
                            "OpenAI function calling (tools=[...], tool_calls; vLLM with a tool parser, OpenAI)")
    agent.add_argument("--coords", choices=COORDS, default="resized",
                       help="the boxes' convention: pixels of the image as sent, normalized 0-1000, or Qwen2.5-VL's "
                            "smart_resize grid (DeepEyes, Pixel-Reasoner)")
    agent.add_argument("--max-turns", type=int, default=6, metavar="N", help="model calls per trace at most")
    agent.add_argument("--system-prompt", type=Path, metavar="FILE",
                       help="use this system prompt (a model's own, e.g. the one it was trained with) instead of "
                            "mmfaith's; its hash is recorded")
    replay = parser.add_argument_group("the replays")
    replay.add_argument("--continuation", choices=CONTINUATIONS, default="continue",
                        help="continue: the last assistant message is continued (vLLM continue_final_message); "
                             "user-turn: a final user turn asks only for the answer")
    replay.add_argument("--seed", type=int, default=0, help="seed of the rule injector and the noise crops")
    replay.add_argument("--traces", type=Path, metavar="FILE",
                        help="replay the trace lines of this predictions file instead of running the agent loop")
    replay.add_argument("--injector-model", metavar="MODEL",
                        help="inject the text mistakes with this model (OpenAI-compatible; default: the offline rule "
                             "injector)")
    replay.add_argument("--injector-base-url", metavar="URL", help="the injector model's base URL")
    replay.add_argument("--injector-api-key-env", metavar="NAME", help="environment variable holding its key")


def probe_plan(options: dict[str, Any]) -> ProbePlan:
    from mmfaith.clients import ModelEndpoint
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.mcot.agent import AgentSettings
    from mmfaith.evaluators.mcot.interventions import LlmInjector, RuleInjector
    from mmfaith.evaluators.mcot.run import McotProbePlan

    if options["max_turns"] < 1:
        raise MmfaithError(f"--max-turns must be 1 or more, not {options['max_turns']}.")
    prompt_file = options.get("system_prompt")
    try:
        prompt = prompt_file.read_text(encoding="utf-8") if prompt_file else None
    except (OSError, UnicodeDecodeError) as exc:
        raise MmfaithError(f"--system-prompt {prompt_file}: cannot read it as UTF-8 text ({exc}).") from exc
    settings = AgentSettings(protocol=options["protocol"], coords=options["coords"], max_turns=options["max_turns"],
                             continuation=options["continuation"], seed=options["seed"], system_prompt=prompt)
    injector: Any = RuleInjector()
    if options.get("injector_model"):
        injector = LlmInjector(ModelEndpoint("openai", options["injector_model"], options.get("injector_base_url"),
                                             options.get("injector_api_key_env")))
    return McotProbePlan(settings, injector, options.get("traces"), options["circular"])


def reference_model(name: str, dataset: EvalDataset) -> ReferenceModel:
    from mmfaith.evaluators.mcot.reference import McotReference

    return McotReference(name, dataset)  # type: ignore[arg-type]


def add_score_options(parser: argparse.ArgumentParser) -> None:
    """The LLM reader of its multiple-choice answers; the judge of reliability and sufficiency."""
    from mmfaith.cli_options import add_reader_options, add_workers_option

    parser.description = SCORE_DESCRIPTION
    add_reader_options(parser)
    add_workers_option(parser, "chunks of questions", "; an LLM judge or reader keeps one process")
    judge = parser.add_argument_group("judge (reliability, sufficiency)")
    judge.add_argument("--judge", default="geometric", metavar="geometric|MODEL",
                       help="geometric (offline: the crops cover the target boxes) or an OpenAI-compatible vision model")
    judge.add_argument("--judge-base-url", metavar="URL", help="the judge model's base URL")
    judge.add_argument("--judge-api-key-env", metavar="NAME", help="environment variable holding the judge's key")
    judge.add_argument("--judge-workers", type=int, default=4, metavar="N", help="parallel judge calls")
    judge.add_argument("--judge-agreement", metavar="geometric|MODEL",
                       help="also run this second judge and report how often the two agree")
    judge.add_argument("--coverage", type=float, default=None, metavar="SHARE",
                       help="geometric judge: share of the target area the crops must cover (default 0.5)")
    judge.add_argument("--max-crop-share", type=float, default=0.6, metavar="SHARE",
                       help="a crop larger than this share of the image is no zoom: it earns no sufficiency and no "
                            "target hit (default 0.6)")


def score(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.mcot.score import McotScoreRequest, score_mcot
    from mmfaith.evaluators.score_cli import print_score_line
    from mmfaith.nouns import counted

    metrics = score_mcot(McotScoreRequest.from_args(args))
    print_score_line("mcot", counted(metrics["counts"]["items"], "question"), metrics, args.out)
    return 0
