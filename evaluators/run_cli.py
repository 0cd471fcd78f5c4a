"""The `run` and `serve-reference` verbs of the `mmfaith` command (wired in by mmfaith/cli.py).

`register(subparsers)` adds both; each handler only parses flags into the stage's request and
calls its entry function (`run_spd_faith`, `ReferenceServer`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

RUN_EXAMPLE = """examples:
  mmfaith serve-reference --model oracle --dataset out/spd --port 8011 &
  mmfaith run spd-faith --dataset out/spd --model oracle --base-url http://127.0.0.1:8011/v1 --out runs/oracle
  # a vLLM server (or several replicas, load spread round-robin):
  mmfaith run spd-faith --dataset out/spd --model Qwen/Qwen2.5-VL-7B-Instruct \\
      --base-url http://gpu1:8000/v1 --base-url http://gpu2:8000/v1 --concurrency 64 --out runs/qwen
A killed run resumes when the same command is run again."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `run spd-faith` and `serve-reference` to the root parser's subcommands."""
    _add_run(subparsers)
    _add_serve_reference(subparsers)


# Flags left out keep RunRequest's defaults; the parser does not import the run module (and with it
# the openai client) so that every other verb starts fast.
UNSET = argparse.SUPPRESS
TUNABLE = ("layout", "order", "seed", "max_tokens", "temperature", "concurrency", "timeout_s", "max_attempts")


def _add_run(subparsers: argparse._SubParsersAction) -> None:
    from mmfaith.evaluators.spd_faith.prompts import LAYOUTS, ORDER_CHOICES
    run = subparsers.add_parser("run", help="ask a model every probe of a benchmark; write predictions.jsonl",
                                description="Send a benchmark's probes to a model over the OpenAI chat-completions "
                                            "protocol and record its answers (resumable).")
    families = run.add_subparsers(dest="family", required=True, metavar="FAMILY")
    spd = families.add_parser(
        "spd-faith", help="SPD-Faith: same / different / count / describe per image pair",
        description="Ask every SPD-Faith pair's four probes; describe is asked with the model's own count.",
        epilog=RUN_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = spd.add_argument_group("what and where")
    what.add_argument("--dataset", type=Path, required=True, metavar="SOURCE",
                      help="an SPD-Faith build dir, release folder, or Hub repo ORG/NAME[@REVISION]")
    what.add_argument("--model", metavar="NAME", help="model name the server knows (default with --serve: its argument)")
    what.add_argument("--base-url", action="append", metavar="URL", dest="base_urls", default=[],
                      help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1; repeat for replicas")
    what.add_argument("--out", type=Path, required=True, metavar="RUN_DIR",
                      help="run folder: predictions.jsonl and run.json (resumable)")
    what.add_argument("--limit", type=int, metavar="N", help="only the first N pairs")
    what.add_argument("--api-key-env", metavar="NAME",
                      help="environment variable holding the key (default: OPENAI_API_KEY if set, else the "
                           "placeholder EMPTY that local servers accept)")
    serve = spd.add_argument_group("starting vLLM (instead of --base-url)")
    serve.add_argument("--serve", metavar="MODEL_PATH_OR_ID",
                       help="start a vLLM server on this model, run, then stop it (weights must be local: no downloads)")
    serve.add_argument("--vllm-python", type=Path, metavar="PATH",
                       help="python of the environment where vLLM is installed (default: this one; "
                            "tools/install-vllm.sh makes .venv-vllm)")
    serve.add_argument("--serve-max-model-len", type=int, default=None, metavar="N",
                       help="vLLM --max-model-len (default: vLLM's own choice from the model)")
    serve.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                       help="one more argument for the vLLM server (repeatable), e.g. --serve-arg=--tensor-parallel-size=2")
    how = spd.add_argument_group("how the pairs are shown")
    how.add_argument("--pair-layout", choices=LAYOUTS, default=UNSET, dest="layout",
                     help="two images in one message (default), or one canvas with both side by side")
    how.add_argument("--order", choices=ORDER_CHOICES, default=UNSET,
                     help="which image comes first (default original-first); random is fixed by --seed and the pair id")
    how.add_argument("--seed", type=int, default=UNSET, help="default 0")
    gen = spd.add_argument_group("generation and transport")
    gen.add_argument("--max-tokens", type=int, default=UNSET, help="default 1024")
    gen.add_argument("--temperature", type=float, default=UNSET, help="default 0")
    gen.add_argument("--concurrency", type=int, default=UNSET, help="requests in flight at most (default 16)")
    gen.add_argument("--timeout", type=float, default=UNSET, dest="timeout_s", metavar="SECONDS",
                     help="per request attempt (default 300)")
    gen.add_argument("--max-attempts", type=int, default=UNSET,
                     help="attempts per call; 429, 5xx, timeouts and connection errors are retried (default 5)")
    gen.add_argument("--dry-run", action="store_true", help="print the requests and a token estimate; send nothing")
    gen.add_argument("--no-progress", action="store_true", help="no progress bar")
    spd.set_defaults(handler=_run_spd)


def _run_spd(args: argparse.Namespace) -> int:
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.spd_faith.run import RunRequest, run_spd_faith
    from mmfaith.evaluators.vllm_serve import serve_vllm

    if bool(args.serve) == bool(args.base_urls):
        raise MmfaithError("give --base-url URL (a running server) or --serve MODEL (mmfaith starts vLLM), not both.")

    given = {name: getattr(args, name) for name in TUNABLE if hasattr(args, name)}

    def request(model: str, base_urls: tuple[str, ...]) -> RunRequest:
        return RunRequest(dataset=args.dataset, model=model, base_urls=base_urls, out=args.out, limit=args.limit,
                          dry_run=args.dry_run, api_key_env=args.api_key_env, progress=not args.no_progress, **given)

    if args.serve:
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"starting vLLM on {args.serve} (log: {args.out / 'vllm.log'}) ...", flush=True)
        with serve_vllm(args.serve, python=args.vllm_python, max_model_len=args.serve_max_model_len,
                        extra_args=tuple(args.serve_arg), served_model_name=args.model,
                        log_path=args.out / "vllm.log") as endpoint:
            summary = run_spd_faith(request(endpoint.model, (endpoint.base_url,)))
    else:
        if not args.model:
            raise MmfaithError("--model NAME is required with --base-url (the name the server serves).")
        summary = run_spd_faith(request(args.model, tuple(args.base_urls)))
    if summary.dry_run:
        return 0
    print(summary.line())
    return 1 if summary.failed else 0


def _add_serve_reference(subparsers: argparse._SubParsersAction) -> None:
    from mmfaith.evaluators.spd_faith.reference import MODELS

    serve = subparsers.add_parser(
        "serve-reference", help="serve a deterministic reference model (oracle, blind, pixel-diff) over a dataset",
        description="An OpenAI-compatible chat server whose model answers SPD-Faith probes from the gold (oracle), "
                    "without looking (blind) or by comparing pixels (pixel-diff). Ctrl-C stops it.")
    serve.add_argument("--model", choices=tuple(MODELS), required=True)
    serve.add_argument("--dataset", type=Path, required=True, metavar="BUILD_DIR")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--latency", type=float, default=0.0, metavar="SECONDS",
                       help="wait this long before each answer (simulates a model, for load tests)")
    serve.set_defaults(handler=_serve_reference)


def _serve_reference(args: argparse.Namespace) -> int:
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.reference_server import ReferenceServer
    from mmfaith.loaders.spd_faith.dataset import open_spd_dataset

    dataset = open_spd_dataset(args.dataset)
    try:
        server = ReferenceServer(dataset, args.model, host=args.host, port=args.port, latency_s=args.latency)
    except OSError as exc:
        raise MmfaithError(f"--port {args.port}: cannot listen on {args.host}:{args.port} ({exc.strerror}); "
                           "pick a free port.") from exc
    print(f"serving {args.model} over {len(dataset.pairs)} pairs at {server.base_url} (Ctrl-C stops)", flush=True)
    server.serve_forever()
    print("stopped", flush=True)
    return 0
