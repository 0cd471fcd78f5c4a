"""The `run` and `serve-reference` verbs of the `mmfaith` command, for every registered family.

`register(subparsers)` adds both. `run FAMILY` has the options every family shares (dataset,
model, servers, generation and transport, `--serve`) and the family's own (its
`add_run_options`); the handler builds the family's probe plan and runs it on the shared engine
(`run_engine.run_benchmark`). `serve-reference [FAMILY]` serves one of the family's reference
models (the family defaults to the one the dataset's build.json or manifest names).
"""
from __future__ import annotations

import argparse
import contextlib
import ipaddress
import shlex
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.cli_help import HelpFormatter, family_parsers
from mmfaith.errors import MmfaithError
from mmfaith.nouns import plural

RUN_EXAMPLE = """examples:
  mmfaith serve-reference {family} --model {model} --dataset out/{short} --port 8011 &
  mmfaith run {family} --dataset out/{short} --model {model} --base-url http://127.0.0.1:8011/v1 --out runs/{model}
  # a vLLM server (or several replicas, load spread round-robin):
  mmfaith run {family} --dataset out/{short} --model Qwen/Qwen2.5-VL-7B-Instruct \\
      --base-url http://gpu1:8000/v1 --base-url http://gpu2:8000/v1 --concurrency 64 --out runs/qwen
A killed run resumes when the same command is run again."""
SHARED_TUNABLE = ("max_tokens", "temperature", "concurrency", "timeout_s", "max_attempts", "sampling_seed", "repeats")
LOOPBACK_FLAG = "--i-know-this-serves-gold"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `run FAMILY` (one subcommand per registered family) and `serve-reference`."""
    family_parsers(subparsers, "run", "ask a model every probe of a benchmark; write predictions.jsonl",
                   "Send a benchmark's probes to a model over the OpenAI chat-completions protocol and record its "
                   "answers (resumable).", families.all_families(),
                   help_of=lambda family: f"{family.title}: {', '.join(p.name for p in family.probes)}",
                   populate=_populate_run,
                   epilog_of=lambda family: RUN_EXAMPLE.format(family=family.name, short=family.name.split("-")[0],
                                                               model=family.reference_models[0][0]))
    _add_serve_reference(subparsers)


def _populate_run(family: families.Family, parser: argparse.ArgumentParser) -> None:
    add_shared_run_options(parser)
    before = {action.dest for action in parser._actions}
    family.parts().add_run_options(parser)
    own = tuple(action.dest for action in parser._actions if action.dest not in before)
    parser.set_defaults(handler=_run, family_options=own)


def _default(name: str) -> object:
    from mmfaith.evaluators.run_settings import RunSettings

    return next(field.default for field in fields(RunSettings) if field.name == name)


def shared_run_dests() -> list[str]:
    """The dests of the options every `run FAMILY` shares, except --dataset and --out (`evaluate` takes them)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_shared_run_options(parser, dataset_and_out=False)
    return [action.dest for action in parser._actions]


def add_shared_run_options(parser: argparse.ArgumentParser, dataset_and_out: bool = True) -> None:
    """The options of `run FAMILY` every family shares; without --dataset and --out for `evaluate`."""
    what = parser.add_argument_group("what and where")
    if dataset_and_out:
        what.add_argument("--dataset", required=True, metavar="SOURCE",
                          help="a build dir, release folder, or Hub repo ORG/NAME[@REVISION]")
    what.add_argument("--model", metavar="NAME", help="model name the server knows (default with --serve: its argument)")
    what.add_argument("--base-url", action="append", metavar="URL", dest="base_urls", default=[],
                      help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1; repeat for replicas")
    if dataset_and_out:
        what.add_argument("--out", type=Path, required=True, metavar="RUN_DIR",
                          help="run folder: predictions.jsonl and run.json (resumable)")
    what.add_argument("--limit", type=int, metavar="N", help="only the first N items")
    what.add_argument("--api-key-env", metavar="NAME",
                      help="environment variable holding the key (default: OPENAI_API_KEY if set, else the "
                           "placeholder EMPTY that local servers accept)")
    serve = parser.add_argument_group("starting vLLM (instead of --base-url)")
    serve.add_argument("--serve", metavar="MODEL_PATH_OR_ID",
                       help="start a vLLM server on this model, run, then stop it (weights must be local: no downloads)")
    serve.add_argument("--vllm-python", type=Path, metavar="PATH",
                       help="python of the environment where vLLM is installed (default: this one; "
                            "tools/install-vllm.sh makes .venv-vllm)")
    serve.add_argument("--serve-max-model-len", type=int, default=None, metavar="N",
                       help="vLLM --max-model-len (default: vLLM's own choice from the model)")
    serve.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                       help="one more argument for the vLLM server (repeatable), e.g. --serve-arg=--tensor-parallel-size=2")
    serve.add_argument("--serve-args", default="", metavar="'ARGS'",
                       help="vLLM's own options as one string, passed through and recorded in run.json, e.g. "
                            "--serve-args '--tensor-parallel-size 2 --data-parallel-size 4'")
    serve.add_argument("--replicas", type=int, default=1, metavar="N",
                       help="start N vLLM servers on disjoint GPU sets and spread the run over them (default 1)")
    gen = parser.add_argument_group("generation and transport")
    gen.add_argument("--max-tokens", type=int, default=_default("max_tokens"), help="completion tokens per call")
    gen.add_argument("--temperature", type=float, default=_default("temperature"), help="sampling temperature")
    gen.add_argument("--sampling-seed", type=int, default=_default("sampling_seed"), metavar="N",
                     help="each request's `seed` is derived from N, the item, the probe and the repeat (recorded "
                          "on every prediction line); the same N asks the same seeds")
    gen.add_argument("--repeats", type=int, default=_default("repeats"), metavar="N",
                     help="ask every item's probes N times, each repeat with its own seeds (sampling noise: "
                          "score each with `score --repeat R`, pool them with `report --pool`)")
    gen.add_argument("--concurrency", type=int, default=_default("concurrency"), help="requests in flight at most")
    gen.add_argument("--timeout", type=float, default=_default("timeout_s"), dest="timeout_s", metavar="SECONDS",
                     help="deadline of each attempt of a call, whole (connecting, sending, reading the answer)")
    gen.add_argument("--max-attempts", type=int, default=_default("max_attempts"),
                     help="attempts per call; 408, 429, 5xx, timeouts and connection errors are retried")
    blind = parser.add_argument_group("validity controls (docs/design.md, Validity)")
    blind.add_argument("--no-image", action="store_true",
                       help="send every probe with its image parts removed and one sentence saying no image is "
                            "given (MMStar's w/o-image run; `mmfaith report` pairs it with the with-image run)")
    blind.add_argument("--circular", action="store_true",
                       help="ask each multiple-choice question once per rotation of its options (MMBench's "
                            "CircularEval); score reports accuracy_circular")
    gen.add_argument("--dry-run", action="store_true", help="print the requests and a token estimate; send nothing")
    gen.add_argument("--no-progress", action="store_true", help="no progress bar")


def _run(args: argparse.Namespace) -> int:
    if bool(args.serve) == bool(args.base_urls):
        raise MmfaithError("give --base-url URL (a running server) or --serve MODEL (mmfaith starts vLLM), not both.")
    family = families.get(args.family)
    plan = family_plan(args, family)
    dataset = family.parts().open_dataset(args.dataset)
    if args.serve:
        with served_replicas(args, limit_images=images_per_request(plan)) as (model, base_urls, serve):
            summary = run_family(args, family.name, plan, dataset, model, base_urls, serve)
    else:
        if not args.model:
            raise MmfaithError("--model NAME is required with --base-url (the name the server serves).")
        summary = run_family(args, family.name, plan, dataset, args.model, tuple(args.base_urls))
    return 1 if summary.failed and not summary.dry_run else 0


def family_plan(args: argparse.Namespace, family: families.Family) -> Any:
    """The family's probe plan from a parsed `run FAMILY` command line (its own options and --circular)."""
    return family.parts().probe_plan({**{name: getattr(args, name) for name in args.family_options},
                                      "circular": args.circular})


def images_per_request(plan: Any) -> int:
    """The most images one request of the plan shows (at least 2; MCoT: the image and a crop per turn)."""
    return max(2, getattr(plan, "images_per_request", 2))


def run_family(args: argparse.Namespace, family: str, plan: Any, dataset: Any, model: str,
               base_urls: tuple[str, ...], serve: dict[str, Any] | None = None) -> Any:
    """Run `plan` over `dataset` with a parsed `run FAMILY` command line's shared settings against `base_urls`;
    print the summary line (not for a dry run) and return the `run_engine.RunSummary`."""
    from mmfaith.evaluators.run_engine import run_benchmark
    from mmfaith.evaluators.run_settings import RunSettings

    settings = RunSettings(dataset=args.dataset, model=model, base_urls=base_urls, out=args.out, limit=args.limit,
                           dry_run=args.dry_run, api_key_env=args.api_key_env, progress=not args.no_progress,
                           serve=serve, no_image=args.no_image,
                           **{name: getattr(args, name) for name in SHARED_TUNABLE})
    summary = run_benchmark(family, settings, dataset, plan)
    if not summary.dry_run:
        print(summary.line())
    return summary


def _add_serve_reference(subparsers: argparse._SubParsersAction) -> None:
    models = "; ".join(f"{family.name}: {', '.join(name for name, _ in family.reference_models)}"
                       for family in families.all_families())
    serve = subparsers.add_parser(
        "serve-reference", help="serve a deterministic reference model (e.g. oracle, blind) over a dataset",
        description="An OpenAI-compatible chat server whose model answers a family's probes deterministically: "
                    "from the gold (oracle), without looking (blind), or as the family's other reference models "
                    "do (`mmfaith families` lists them). It serves gold answers: it listens on 127.0.0.1 "
                    f"unless you pass {LOOPBACK_FLAG}. Ctrl-C stops it.",
        formatter_class=HelpFormatter)
    serve.add_argument("family", nargs="?", metavar="FAMILY",
                       help="the dataset's family (default: the one its build.json or manifest names)")
    serve.add_argument("--model", required=True, metavar="NAME", help=f"one of the family's reference models ({models})")
    serve.add_argument("--dataset", metavar="SOURCE", help="a build dir, release folder or Hub repo id")
    serve.add_argument("--suite", metavar="SUITE",
                       help="instead of --dataset: serve the role across every family of a suite (`default`, the "
                            "embedded sample's, or a suite file): oracle (each family's good end), prior, or a "
                            "family's own model name (docs/evaluate.md)")
    serve.add_argument("--port", type=int, required=True, help="TCP port, 1-65535 (0: any free port)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument(LOOPBACK_FLAG, action="store_true", dest="allow_public",
                       help="allow a --host other than loopback (anyone who reaches it reads the gold answers)")
    serve.add_argument("--latency", type=float, default=0.0, metavar="SECONDS",
                       help="wait this long before each answer (simulates a model, for load tests)")
    serve.set_defaults(handler=_serve_reference)


def _serve_reference(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.reference_server import ReferenceServer

    if bool(args.suite) == bool(args.dataset):
        raise MmfaithError("give --dataset SOURCE (one family's dataset) or --suite SUITE (every family), not both.")
    if not 0 <= args.port <= 65535:
        raise MmfaithError(f"--port {args.port}: a TCP port is 1-65535 (or 0 for any free port).")
    if not _is_loopback(args.host):
        if not args.allow_public:
            raise MmfaithError(f"--host {args.host}: the reference server answers from the gold; it listens on "
                               f"loopback only unless you add {LOOPBACK_FLAG}.")
        print(f"mmfaith: warning: serving gold answers on {args.host}: anyone who reaches it can read them.",
              flush=True)
    if args.suite:
        from mmfaith.evaluators.suite_reference import suite_reference_model
        from mmfaith.suite import load_suite

        suite = load_suite(args.suite)
        model = suite_reference_model(suite, args.model)
        what = f"the {args.model} role of suite {suite.name} ({', '.join(family for family, _ in model.models)})"
        server = _listen(args, lambda: ReferenceServer(None, model, host=args.host, port=args.port,
                                                       latency_s=args.latency))
    else:
        family = families.get(args.family or families.family_of_dataset(Path(args.dataset)))
        known = [name for name, _ in family.reference_models]
        if args.model not in known:
            raise MmfaithError(f"--model {args.model}: {family.name}'s reference models are {', '.join(known)}.")
        dataset = family.parts().open_dataset(args.dataset)
        what = f"{family.name} {args.model} over {items_phrase(dataset.items)}"
        server = _listen(args, lambda: ReferenceServer(dataset, args.model, host=args.host, port=args.port,
                                                       latency_s=args.latency, family=family.name))
    print(f"serving {what} at {server.base_url} (Ctrl-C stops)", flush=True)
    server.serve_forever()
    print("stopped", flush=True)
    return 0


def _listen(args: argparse.Namespace, start: Callable[[], Any]) -> Any:
    """The reference server `start()` makes, or a one-line error when its port cannot be listened on."""
    try:
        return start()
    except OSError as exc:
        raise MmfaithError(f"--port {args.port}: cannot listen on {args.host}:{args.port} ({exc.strerror}); "
                           "pick a free port.") from exc


def items_phrase(items: Sequence[Any]) -> str:
    """How many items of each kind, in order of first appearance, by each item class's NOUN: "16 pairs and 16
    perception items"."""
    counts = Counter(type(item).NOUN for item in items)
    parts = [f"{n} {noun if n == 1 else plural(noun)}" for noun, n in counts.items()]
    return " and ".join(parts) if parts else "0 items"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def served_replicas(args: argparse.Namespace, limit_images: int) -> Iterator[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """Start `--replicas` vLLM servers for `--serve` with the pass-through options, each taking `limit_images`
    images per request; yield (model, base URLs, what run.json records of them)."""
    from mmfaith.evaluators.vllm_serve import serve_replicas

    try:
        passed = [*args.serve_arg, *shlex.split(args.serve_args)]
    except ValueError as exc:
        raise MmfaithError(f"--serve-args {args.serve_args!r}: {exc} (quote it as a shell would).") from exc
    where = args.out / ("vllm.log" if args.replicas == 1 else "vllm-*.log")
    print(f"starting {args.replicas} vLLM server(s) on {args.serve} (log: {where}) ...", flush=True)
    with serve_replicas(args.serve, args.replicas, log_dir=args.out, extra_args=passed, python=args.vllm_python,
                        max_model_len=args.serve_max_model_len, served_model_name=args.model,
                        limit_images=limit_images) as endpoints:
        record = {"model": args.serve, "args": passed, "replicas": args.replicas,
                  "gpu_sets": [list(e.gpus) if e.gpus is not None else None for e in endpoints]}
        yield endpoints[0].model, tuple(e.base_url for e in endpoints), record
