"""The `export` and `import` verbs: mmfaith benchmarks as harness tasks, harness logs as predictions.

`register(subparsers)` adds `export lmms-eval|inspect SOURCE --out DIR` and
`import lmms-eval|inspect LOGS --dataset SOURCE --out predictions.jsonl` (docs/harnesses.md).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mmfaith.cli_help import HelpFormatter

HARNESSES = ("lmms-eval", "inspect")
EXPORT_EXAMPLE = """examples:
  mmfaith export lmms-eval out/spd --out tasks/lmms
  python -m lmms_eval --model openai --model_args model_version=MODEL,base_url=http://127.0.0.1:8000/v1 \\
      --include_path tasks/lmms --tasks mmfaith_spd_faith --log_samples --output_path logs/lmms
  mmfaith export inspect out/spd --out tasks/inspect
  inspect eval tasks/inspect/mmfaith_spd_faith.py --model openai-api/local/MODEL --log-dir logs/inspect
  mmfaith export inspect out/mcot --out tasks/mcot     # then: inspect eval mmfaith_mcot.py -T max_turns=6 ..."""
IMPORT_EXAMPLE = """examples:
  mmfaith import lmms-eval logs/lmms --dataset out/spd --out runs/lmms/predictions.jsonl
  mmfaith import inspect logs/inspect --dataset out/spd --out runs/inspect/predictions.jsonl
  mmfaith score spd-faith --dataset out/spd --predictions runs/lmms/predictions.jsonl --out scores/lmms"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `export` and `import` verbs."""
    export = subparsers.add_parser(
        "export", help="write a benchmark as lmms-eval or inspect_ai tasks",
        description="Write a dataset's probes as tasks of another evaluation harness: the same prompt bytes as "
                    "`mmfaith run` (the task imports mmfaith to render them), the stored images, every probe kind "
                    "of the family (independent, dependent ones asked with the model's own earlier answer, and in "
                    "inspect MCoT's zoom-in tool loop and the replays of its traces).",
        epilog=EXPORT_EXAMPLE, formatter_class=HelpFormatter)
    export.add_argument("harness", choices=HARNESSES, help="the harness to write tasks for")
    export.add_argument("source", metavar="SOURCE", help="a build dir, release folder or Hub repo ORG/NAME[@REVISION]")
    export.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the task files and rows")
    export.add_argument("--family", metavar="NAME", help="the dataset's family (default: the one it names)")
    export.add_argument("--max-new-tokens", type=int, default=1024, metavar="N",
                        help="completion tokens per call (`mmfaith run --max-tokens`)")
    export.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (`mmfaith run`'s 0)")
    export.add_argument("--no-progress", action="store_true", help="no progress bars")
    export.set_defaults(handler=_export)

    importing = subparsers.add_parser(
        "import", help="read an lmms-eval or inspect_ai run's logs back as predictions.jsonl",
        description="Turn a harness's logs of an exported task into an ordinary prediction file (failed calls "
                    "as error lines), with import.json (provenance) beside it, for `mmfaith score`.",
        epilog=IMPORT_EXAMPLE, formatter_class=HelpFormatter)
    importing.add_argument("harness", choices=HARNESSES, help="the harness whose logs these are")
    importing.add_argument("logs", type=Path, metavar="LOGS",
                           help="lmms-eval: its --output_path (or a samples file); inspect: a log dir or .eval file")
    importing.add_argument("--dataset", required=True, metavar="SOURCE", help="the dataset the task was exported from")
    importing.add_argument("--out", type=Path, required=True, metavar="FILE", help="the predictions.jsonl to write")
    importing.add_argument("--model", metavar="NAME", help="the model's name (default: the one the logs give)")
    importing.add_argument("--export", type=Path, metavar="DIR",
                           help="the export folder, whose export.json is copied into import.json")
    importing.add_argument("--family", metavar="NAME", help="the dataset's family (default: the one it names)")
    importing.add_argument("--overwrite", action="store_true",
                           help="replace an existing --out (and the import.json beside it); default: refuse")
    importing.set_defaults(handler=_import)


def _export(args: argparse.Namespace) -> int:
    from mmfaith.errors import MmfaithError

    if args.max_new_tokens < 1:
        raise MmfaithError(f"--max-new-tokens must be 1 or more, not {args.max_new_tokens}.")
    if args.harness == "lmms-eval":
        from mmfaith.evaluators.harness.lmms_eval_export import export_lmms_eval

        lossy = os.environ.get("LMMS_IMAGE_ENCODE_FORMAT", "PNG").upper()
        if lossy in ("JPEG", "JPG", "WEBP"):
            print(f"mmfaith: warning: LMMS_IMAGE_ENCODE_FORMAT={lossy} is set: lmms-eval would send lossy images; the "
                  "exported task refuses to run with it (unset it or set PNG).", file=sys.stderr)
        done = export_lmms_eval(args.source, args.out, args.family, args.max_new_tokens, args.temperature,
                                not args.no_progress)
        if done.reencoded_differently:
            print(f"mmfaith: warning: {done.reencoded_differently} of {done.images} images re-encode to other PNG "
                  "bytes (same pixels): lmms-eval sends its own encoding, so a server matching images by hash "
                  "(mmfaith serve-reference) will not recognise them; inspect sends the stored bytes.",
                  file=sys.stderr)
        print(f"wrote {done.group} ({', '.join(f'{task}: {rows} rows' for task, rows in done.tasks.items())}) to "
              f"{done.out}; run: python -m lmms_eval --include_path {done.out} --tasks {done.group} --log_samples ...")
        return 0
    from mmfaith.evaluators.harness.inspect_export import export_inspect

    written = export_inspect(args.source, args.out, args.family, args.max_new_tokens, args.temperature,
                             not args.no_progress)
    # inspect eval refuses absolute paths ("Non-relative patterns are unsupported"): the hint runs from here
    print(f"wrote {written.task_file} ({written.rows} samples); run: inspect eval "
          f"{os.path.relpath(written.task_file)} --model ...")
    return 0


def _import(args: argparse.Namespace) -> int:
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.harness.importer import write_predictions

    if args.out.exists() and not args.overwrite:
        raise MmfaithError(f"import --out {args.out}: exists; choose a new --out, or pass --overwrite to replace it.")

    if args.harness == "lmms-eval":
        from mmfaith.evaluators.harness.lmms_eval_logs import read_lmms_eval_logs

        log = read_lmms_eval_logs(args.logs)
    else:
        from mmfaith.evaluators.harness.inspect_logs import read_inspect_logs

        log = read_inspect_logs(args.logs)
    print(write_predictions(log, args.dataset, args.out, args.model, args.family, args.export).line())
    return 0
