"""`mmfaith view DIR...`: write (or rewrite) the explorer of a score dir, a report or profiles, and serve it.

DIR is a score dir (metrics.json; --dataset names the dataset it scored, else the page written before
is rewritten), a report dir (comparison.json; its score dirs come from --scores, else from the
list its earlier page holds) or one or more `evaluate` folders (profile.json; their leaderboard, written
into --out or the first). `--serve` serves the folder on 127.0.0.1 only (as `serve-reference`) for a
browser on another machine reached through an SSH tunnel.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.cli_help import HelpFormatter
from mmfaith.errors import MmfaithError

EXAMPLE = """examples:
  mmfaith view scores/oracle --dataset out/spd      # writes scores/oracle/index.html
  mmfaith view compare --scores scores/oracle scores/blind
  mmfaith view profiles/model-a profiles/model-b --out leaderboard
  mmfaith view scores/oracle --serve --port 8765    # then ssh -L 8765:127.0.0.1:8765 HOST"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `view` verb."""
    view = subparsers.add_parser("view", help="write the browser explorer of a score, report or profile folder",
                                 description=__doc__.split("\n\n", 1)[1], epilog=EXAMPLE, formatter_class=HelpFormatter)
    view.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="a score dir, a report dir, or profile folders")
    view.add_argument("--dataset", metavar="SOURCE", help="the dataset a score dir scored (build dir, release, ORG/NAME)")
    view.add_argument("--predictions", type=Path, metavar="FILE", help="the predictions it scored (shows the replies)")
    view.add_argument("--scores", type=Path, nargs="+", metavar="SCORE_DIR", help="a report dir's score dirs, in order")
    view.add_argument("--out", type=Path, metavar="DIR", help="profiles: where the leaderboard goes (default: the first)")
    view.add_argument("--workers", type=int, default=4, help="threads making thumbnails")
    view.add_argument("--serve", action="store_true", help="serve the folder on 127.0.0.1 until interrupted")
    view.add_argument("--port", type=int, default=8765, help="--serve's port on 127.0.0.1")
    view.add_argument("--no-progress", action="store_true", help="no progress bar")
    view.set_defaults(handler=run_view)


def run_view(args: argparse.Namespace) -> int:
    from mmfaith.explorer import sources

    first, progress = args.dirs[0], not args.no_progress
    if all((d / "profile.json").is_file() for d in args.dirs):
        folder = args.out or first
        folder.mkdir(parents=True, exist_ok=True)
        page = sources.write_profiles_explorer(folder, args.dirs, args.workers, progress)
    elif len(args.dirs) > 1:
        raise MmfaithError("view: several DIRs are viewed together only when each is a profile folder (profile.json); "
                           "give one score or report dir.")
    elif (first / "comparison.json").is_file():
        page = sources.write_report_explorer(first, *_report_inputs(first, args.scores), args.workers, progress)
    elif (first / "metrics.json").is_file():
        page = sources.write_score_explorer(first, args.dataset, args.predictions, args.workers, progress)
    else:
        raise MmfaithError(f"view {first}: not a score dir (metrics.json), report (comparison.json) or profile "
                           "(profile.json).")
    print(f"explorer: {page} (open it in a browser; it needs no server)")
    if args.serve:
        serve(page.parent, args.port)
    return 0


def _report_inputs(report_dir: Path, scores: list[Path] | None) -> tuple[list[Path], list[str]]:
    """A report's score dirs (--scores, else those its explorer data names) and their labels."""
    from mmfaith.evaluators.score_dir import load_metrics, score_labels
    from mmfaith.explorer.page import read_page_data

    if not scores:
        data = read_page_data(report_dir) or {}
        scores = [report_dir / path for path in data.get("score_dirs", [])]
    if not scores:
        raise MmfaithError(f"view {report_dir}: name the report's score dirs with --scores SCORE_DIR...")
    return scores, score_labels(scores, [load_metrics(path) for path in scores])


def serve(folder: Path, port: int) -> None:
    """Serve `folder` on 127.0.0.1:port until interrupted (loopback only: nothing else can reach it)."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {folder} on http://127.0.0.1:{port}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
