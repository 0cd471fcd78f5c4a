"""The `mmfaith annotate` verb: push | pull | status | serve (argument parsing and printing only).

mmfaith/cli.py calls register(subparsers). Handlers return the exit status; user errors are
raised as MmfaithError. No handler prints or writes the API token.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from mmfaith import families
from mmfaith.annotation.votes import POLICIES
from mmfaith.cli_help import HelpFormatter
from mmfaith.errors import MmfaithError

if TYPE_CHECKING:  # label_studio_sdk takes about 1 s to import: only the handlers that talk to a server load it
    from mmfaith.annotation.family import Family
    from mmfaith.annotation.label_studio import PullReport

DEFAULT_API_KEY_ENV = "LABEL_STUDIO_API_KEY"

EXAMPLE = """example (a local server, see `mmfaith annotate serve -h`):
  export LABEL_STUDIO_API_KEY=...            # your token; never printed
  mmfaith annotate push out/spd --url http://127.0.0.1:8080 --project "SPD-Faith out/spd" --files-root .
  ... people verify the pairs in the browser ...
  mmfaith annotate pull out/spd --url http://127.0.0.1:8080 --project "SPD-Faith out/spd"
  mmfaith annotate status out/spd"""


def _labeling(args: argparse.Namespace) -> Family:
    """The labeling of the build's family (`--family`, else the one its build.json names), from the registry."""
    family = families.get(args.family or families.family_of_dataset(args.build_dir))
    return family.part("labeling", "Label Studio labeling config")()


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `annotate` with its four sub-verbs to the mmfaith parser."""
    annotate = subparsers.add_parser(
        "annotate", help="verify a build by people on Label Studio: push, pull, status, serve",
        description="Round trip of a build through Label Studio: push tasks, pull verdicts and corrections "
                    "back into records.jsonl, count them, or start a local server.",
        epilog=EXAMPLE, formatter_class=HelpFormatter)
    verbs = annotate.add_subparsers(dest="annotate_verb", required=True, metavar="VERB")

    def server_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("build_dir", type=Path, metavar="BUILD_DIR")
        p.add_argument("--url", required=True, help="Label Studio base URL, e.g. http://127.0.0.1:8080")
        p.add_argument("--project", required=True, metavar="TITLE", help="project title (found, or created by push)")
        p.add_argument("--family", metavar="NAME",
                       help="the build's family (default: the one its build.json names; see `mmfaith families`)")
        p.add_argument("--api-key-env", default=DEFAULT_API_KEY_ENV, metavar="NAME",
                       help=f"environment variable holding the API token (default {DEFAULT_API_KEY_ENV})")

    p_push = verbs.add_parser("push", help="create/find the project and import one task per record (idempotent)")
    server_args(p_push)
    p_push.add_argument("--files-root", type=Path, metavar="DIR",
                        default=os.environ.get("LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT"),
                        help="the server's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT, a folder above BUILD_DIR "
                             "(default: that variable)")
    p_push.add_argument("--annotators-per-task", type=int, metavar="N",
                        help="people the label stream gives each task (the project's maximum_annotations; "
                             "default: 1 for a new project, unchanged for an existing one)")
    p_push.set_defaults(handler=_run_push)

    p_pull = verbs.add_parser("pull", help="export annotations and merge them into BUILD_DIR/records.jsonl")
    server_args(p_pull)
    p_pull.add_argument("--policy", choices=POLICIES, default="any-reject",
                        help="several annotators: any-reject (one reject rejects) or majority (a tie stays pending)")
    p_pull.set_defaults(handler=_run_pull)

    p_status = verbs.add_parser("status", help="accepted/rejected/pending counts and annotator agreement (kappa)")
    p_status.add_argument("build_dir", type=Path, metavar="BUILD_DIR")
    p_status.set_defaults(handler=_run_status)

    p_serve = verbs.add_parser(
        "serve", help="start a local Label Studio (SQLite, 127.0.0.1) until Ctrl-C",
        description="Start Label Studio from its own venv (tools/install-label-studio.sh) with an admin account "
                    "whose API token is the value of --api-key-env (40 hex characters, e.g. `openssl rand -hex 20`).")
    p_serve.add_argument("--data-dir", type=Path, required=True, metavar="DIR", help="server data (SQLite, uploads)")
    p_serve.add_argument("--files-root", type=Path, required=True, metavar="DIR",
                         help="local-files document root: a folder above the build dirs you will push")
    p_serve.add_argument("--port", type=int, default=8080, help="port Label Studio listens on (127.0.0.1)")
    p_serve.add_argument("--username", required=True, metavar="EMAIL", help="the admin account's email")
    p_serve.add_argument("--password-env", default="LABEL_STUDIO_PASSWORD", metavar="NAME",
                         help="environment variable holding the admin password (default LABEL_STUDIO_PASSWORD)")
    p_serve.add_argument("--api-key-env", default=DEFAULT_API_KEY_ENV, metavar="NAME",
                         help=f"environment variable holding the admin API token (default {DEFAULT_API_KEY_ENV})")
    p_serve.add_argument("--label-studio", metavar="PATH", help="the label-studio executable (default: $MMFAITH_LABEL_STUDIO_BIN, else "
                              "<repo>/.venv-label-studio/bin/label-studio, else label-studio on PATH)")
    p_serve.set_defaults(handler=_run_serve)


INSTALL_HINT = "mmfaith annotate push/pull need label-studio-sdk: pip install 'mmfaith[annotate]'"


def _label_studio() -> ModuleType:
    """mmfaith.annotation.label_studio, or a one-line MmfaithError naming the extra to install when
    label-studio-sdk (the `annotate` extra) is missing."""
    try:
        from mmfaith.annotation import label_studio
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "label_studio_sdk":
            raise
        raise MmfaithError(INSTALL_HINT) from None
    return label_studio


def _run_push(args: argparse.Namespace) -> int:
    label_studio = _label_studio()
    connect, push = label_studio.connect, label_studio.push

    if args.files_root is None:
        raise MmfaithError("push needs --files-root DIR (the server's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT), "
                           "or that variable set.")
    if args.annotators_per_task is not None and args.annotators_per_task < 1:
        raise MmfaithError(f"--annotators-per-task must be 1 or more, not {args.annotators_per_task}.")
    family = _labeling(args)
    report = push(connect(args.url, args.api_key_env), args.build_dir, args.project, family, Path(args.files_root),
                  args.annotators_per_task)
    print(f"project {args.project!r} (id {report.project_id}{', created' if report.created else ''}): "
          f"{len(report.added)} tasks added, {len(report.unchanged)} unchanged, "
          f"{len(report.flagged)} flagged because their images changed")
    for rid in report.flagged:
        print(f"  flagged: {rid}: images changed since the last push; earlier annotations no longer count")
    for task_id in report.unknown_tasks:
        print(f"  task {task_id}: its record id is not in this build")
    return 0


def _print_pull(report: "PullReport") -> None:
    """Everything a pull found, one line each."""
    c = report.counts
    print(f"{c['accepted']} accepted, {c['rejected']} rejected, {c['pending']} pending; "
          f"{len(report.changed)} records changed")
    for rid, task_id, verdicts in report.disagreements:
        print(f"  disagreement: {rid} (task {task_id}): " + ", ".join(f"{a} {v}" for a, v in sorted(verdicts.items())))
    for rid, path, texts in report.conflicts:
        print(f"  conflicting edits of {path} in {rid}, left unchanged: " +
              "; ".join(f"{a}: {t!r}" for a, t in sorted(texts.items())))
    for rid, task_id, ann_id, why in report.misfits:
        print(f"  not counted: annotation {ann_id} on task {task_id} ({rid}) does not fit the config: {why}")
    for rid, task_id, ann_id in report.stale:
        print(f"  not counted: annotation {ann_id} on task {task_id} ({rid}) predates a change of the images")
    for rid, task_id, ann_id in report.skipped:
        print(f"  not counted: annotation {ann_id} on task {task_id} ({rid}) was skipped by its annotator")
    for rid in report.images_changed:
        print(f"  not merged: {rid}: its images changed since its task was pushed; push again")
    for task_id, rid in report.unknown_tasks:
        print(f"  unknown: task {task_id} names record {rid!r}, which this build does not hold (or twice)")
    for rid in report.records_without_task:
        print(f"  no task: {rid}; push again to add it")


def _run_pull(args: argparse.Namespace) -> int:
    label_studio = _label_studio()
    connect, pull = label_studio.connect, label_studio.pull

    family = _labeling(args)
    report = pull(connect(args.url, args.api_key_env), args.build_dir, args.project, family, args.policy)
    _print_pull(report)
    return 0


def _kappa(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _run_status(args: argparse.Namespace) -> int:
    from mmfaith.annotation.status import build_status

    report = build_status(args.build_dir)
    c = report.counts
    print(f"{c['accepted']} accepted, {c['rejected']} rejected, {c['pending']} pending")
    print(f"{report.overlapping} records with two or more annotators; Fleiss' kappa {_kappa(report.fleiss)}")
    for pair, (kappa, shared) in report.cohen.items():
        a, b = pair.split("|")
        print(f"  Cohen's kappa {a} vs {b}: {_kappa(kappa)} over {shared} shared records")
    for rid in report.disagreements:
        print(f"  disagreement: {rid}")
    return 0


def _run_serve(args: argparse.Namespace) -> int:
    from mmfaith.annotation.server import ServerSpec, find_label_studio, start_server, wait_ready
    from mmfaith.child_process import ended_with_parent

    token = os.environ.get(args.api_key_env, "").strip()
    password = os.environ.get(args.password_env, "")
    if len(token) != 40 or any(ch not in "0123456789abcdef" for ch in token):
        raise MmfaithError(f"environment variable {args.api_key_env} must hold the admin token to create: "
                           f"40 lowercase hex characters (e.g. `export {args.api_key_env}=$(openssl rand -hex 20)`).")
    if len(password) < 8:
        raise MmfaithError(f"environment variable {args.password_env} must hold the admin password (8 characters or more).")
    spec = ServerSpec(executable=find_label_studio(args.label_studio), data_dir=args.data_dir.resolve(),
                      files_root=args.files_root.resolve(), port=args.port, username=args.username,
                      password=password, token=token)
    log = spec.data_dir / "label-studio.log"
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    process = start_server(spec, log)
    with ended_with_parent(process):  # Ctrl-C, SIGTERM, SIGHUP or this process's death stop the server too
        waited = wait_ready(spec, process, log)
        print(f"Label Studio ready at {spec.url} after {waited:.0f} s (log: {log}); log in as {spec.username}; "
              f"Ctrl-C stops it.", flush=True)
        while process.poll() is None:
            time.sleep(1)
        raise MmfaithError(f"label-studio exited with status {process.returncode}; see {log}.")
