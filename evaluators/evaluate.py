"""`mmfaith evaluate`: one model through every family of a suite, scored, into one profile.

Contract
--------
`evaluate(args)` takes the parsed `evaluate` command line (the shared `run` options plus --suite,
--families, --out, --seed) and, for each family of the suite in order:

1. resolves its dataset (`suite.suite_dataset`: a source, or a recipe built once into the cache);
2. runs it through the shared engine exactly as `mmfaith run FAMILY --dataset D --out
   OUT/runs/FAMILY SUITE_RUN_ARGS...` with evaluate's shared options (one progress bar per family);
3. scores it as `mmfaith score FAMILY ... --from-run --out OUT/scores/FAMILY`;
4. when the suite's entry asks the no-image pass (``"no_image": true``) and evaluate itself was not
   given --no-image: runs the same probes without the images into OUT/runs/FAMILY.no-image, scores
   them into OUT/scores/FAMILY.no-image, and writes the family's own comparison of the two score
   dirs into OUT/scores/FAMILY.gain (`mmfaith report`: MMStar's multimodal gain, paired per item
   with its 95% bootstrap interval; `no_image_pass`);
5. reads the family's reference ends (`reference_ends`: the prior and the ceiling model run and
   scored on the same dataset with the same arguments, cached by content) and writes the family's
   entry of the profile to OUT/families/FAMILY.json.

A family that fails (an error, or a run with failed requests) is recorded with its error and the
others go on. Then OUT/profile.json (format "mmfaith-profile/1", the contract in
docs/evaluate.md), profile.md and profile.png are written (`profile.write_profile`). The exit
status is 0 when every family succeeded, 1 otherwise.

A killed evaluate resumes: each run dir resumes where it stopped, and a family whose entry was
scored from the same predictions (the same sha256 of each pass's: OUT/families/FAMILY.json) is not
scored again. Nothing in the profile depends on when or in how many sessions it was made, so a
resumed evaluate writes the same bytes.
With `--serve MODEL`, one vLLM server (or `--replicas` of them) serves every family.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from mmfaith import __version__, families
from mmfaith.cache import ContentCache
from mmfaith.dirlock import hold_lock
from mmfaith.errors import MmfaithError
from mmfaith.jsonl import canonical_json, write_text_atomic
from mmfaith.outdir import prepare_out_dir
from mmfaith.suite import Suite, load_suite, suite_dataset

ENDS_CACHE = "profile-ends"


def evaluate(args: argparse.Namespace) -> int:
    """The `evaluate` verb (module docstring); returns the exit status."""
    from mmfaith.evaluators.run_cli import served_replicas

    if bool(args.serve) == bool(args.base_urls):
        raise MmfaithError("give --base-url URL (a running server) or --serve MODEL (mmfaith starts vLLM), not both.")
    if not args.serve and not args.model:
        raise MmfaithError("--model NAME is required with --base-url (the name the server serves).")
    suite = load_suite(args.suite)
    names = chosen_families(suite, args.families)
    if args.dry_run:
        for name in names:
            run_one(name, suite_dataset(suite, name, not args.no_progress), suite.entry(name).run, args,
                    args.model or args.serve, tuple(args.base_urls), Path(args.out) / "runs" / name)
        return 0
    out = prepare_out_dir(args.out, "evaluate")
    with hold_lock(out, "evaluate --out"):
        if args.serve:
            with served_replicas(args, limit_images=_images_per_request(suite, names)) as (model, base_urls, serve):
                entries = {name: evaluate_family(suite, name, args, model, base_urls, serve) for name in names}
        else:
            entries = {name: evaluate_family(suite, name, args, args.model, tuple(args.base_urls)) for name in names}
        return finish_profile(suite, args, entries)


def finish_profile(suite: Suite, args: argparse.Namespace, entries: dict[str, dict[str, Any]]) -> int:
    """OUT/profile.json, profile.md, profile.png and the profile's explorer from the families' entries
    (`evaluate_family`, in the suite's order), and the line saying where; returns the exit status (module
    docstring)."""
    from mmfaith.evaluators.profile import write_profile
    from mmfaith.explorer.sources import write_profiles_explorer

    out, model_name = Path(args.out), args.model or args.serve
    profile = write_profile(out, model_name, suite, entries, _provenance(args, suite, list(entries)))
    explorer = write_profiles_explorer(out, [out], progress=not args.no_progress)
    failed = [name for name, entry in entries.items() if entry["status"] != "ok"]
    print(f"profile of {model_name}: {len(entries) - len(failed)}/{len(entries)} families scored"
          + (f" ({', '.join(failed)} failed: see {out / 'profile.md'})" if failed else "")
          + f"; wrote {out / 'profile.json'}, {out / 'profile.md'}, {out / 'profile.png'}; explorer: {explorer}")
    return 1 if failed or not profile["families"] else 0


def chosen_families(suite: Suite, listed: str | None) -> list[str]:
    """The suite's families, or those of a comma-separated --families LIST (each must be in the suite)."""
    if not listed:
        return suite.families()
    names = [name.strip() for name in listed.split(",") if name.strip()]
    unknown = [name for name in names if name not in suite.families()]
    if unknown or not names:
        raise MmfaithError(f"--families {listed}: {', '.join(unknown) or 'no family'} not in suite {suite.name}; "
                           f"it has {', '.join(suite.families())}.")
    return names


def evaluate_family(suite: Suite, name: str, args: argparse.Namespace, model: str, base_urls: tuple[str, ...],
                    serve: dict[str, Any] | None = None) -> dict[str, Any]:
    """One family's profile entry (module docstring, steps 1-4); a failure is recorded, not raised."""
    from mmfaith.evaluators.profile import family_entry, failed_entry

    out = Path(args.out)
    saved = out / "families" / f"{name}.json"
    predictions_sha256 = None
    try:
        dataset = suite_dataset(suite, name, progress=not args.no_progress)
        passes = {name: args}
        if suite.entry(name).no_image and not args.no_image:
            passes[f"{name}.no-image"] = argparse.Namespace(**{**vars(args), "no_image": True})
        for folder, options in passes.items():
            run_dir = out / "runs" / folder
            summary = run_one(name, dataset, suite.entry(name).run, options, model, base_urls, run_dir, serve)
            if summary.failed:
                raise MmfaithError(f"{summary.failed} requests failed (see {run_dir / 'predictions.jsonl'}); re-run "
                                   "the same command to retry them.")
        predictions_sha256 = {folder: _sha256(out / "runs" / folder / "predictions.jsonl") for folder in passes}
        score_dir = out / "scores" / name
        if saved.is_file() and (score_dir / "metrics.json").is_file():
            state = json.loads(saved.read_text(encoding="utf-8"))
            if state.get("predictions_sha256") == predictions_sha256:
                return state["entry"]  # resumed: scored from these very predictions before the interruption
        for folder in passes:  # the explorer shows the with-image score; the no-image one is read by the gain
            score_one(name, dataset, out / "runs" / folder, out / "scores" / folder, getattr(args, "seed", 0),
                      explorer=folder == name)
        entry = family_entry(name, dataset, out, score_dir, reference_ends(name, dataset, suite.entry(name).run, args),
                             no_image_pass(name, out, getattr(args, "seed", 0)) if len(passes) > 1 else None)
    except MmfaithError as exc:
        print(f"mmfaith: {name} failed: {exc}", flush=True)
        entry = failed_entry(name, str(exc))
    saved.parent.mkdir(parents=True, exist_ok=True)
    state = {"predictions_sha256": predictions_sha256, "entry": entry}
    write_text_atomic(saved, json.dumps(state, indent=2, sort_keys=True) + "\n")
    return entry


def run_one(family: str, dataset: str, run_args: tuple[str, ...], shared: argparse.Namespace, model: str,
            base_urls: tuple[str, ...], run_dir: Path, serve: dict[str, Any] | None = None) -> Any:
    """`mmfaith run FAMILY --dataset D --out RUN_DIR RUN_ARGS...` with `shared`'s run options (a boolean flag is on
    when either side sets it) against `base_urls`; returns the run's `run_engine.RunSummary`."""
    from mmfaith.cli import parser
    from mmfaith.evaluators.run_cli import family_plan, run_family, shared_run_dests

    args = parser().parse_args(["run", family, "--dataset", dataset, "--out", str(run_dir), *run_args])
    for dest in shared_run_dests():
        given = getattr(shared, dest)
        setattr(args, dest, (getattr(args, dest) or given) if isinstance(given, bool) else given)
    fam = families.get(family)
    return run_family(args, family, family_plan(args, fam), fam.parts().open_dataset(dataset), model, base_urls,
                      serve)


def score_one(family: str, dataset: str, run_dir: Path, score_dir: Path, seed: int, explorer: bool = True) -> None:
    """`mmfaith score FAMILY --dataset D --predictions RUN_DIR/predictions.jsonl --from-run --out SCORE_DIR`; without
    `explorer`, the score alone (no index.html: a scratch score nobody opens)."""
    from mmfaith.cli import parser

    predictions = run_dir / "predictions.jsonl"
    args = parser().parse_args(["score", family, "--dataset", dataset, "--predictions", str(predictions),
                                "--from-run", "--out", str(score_dir), "--overwrite", "--seed", str(seed)])
    score = args.handler if explorer else families.get(family).parts().score
    if score(args) != 0:
        raise MmfaithError(f"scoring {predictions} failed; run `mmfaith score {family}` on it to see why.")


def no_image_pass(family: str, out: Path, seed: int) -> dict[str, Any]:
    """The no-image pass of a family's profile entry (module docstring, step 4): the family's own comparison of
    OUT/scores/FAMILY and OUT/scores/FAMILY.no-image into OUT/scores/FAMILY.gain, read back by
    `profile.no_image_block`."""
    from mmfaith.evaluators.profile import no_image_block

    scores = out / "scores"
    with_image, without, gain = scores / family, scores / f"{family}.no-image", scores / f"{family}.gain"
    comparison = families.get(family).part("compare", "comparison report")([with_image, without], gain, 1000, seed,
                                                                          False)
    return no_image_block(family, out, without, gain, comparison)


def reference_ends(family: str, dataset: str, run_args: tuple[str, ...], args: argparse.Namespace) -> dict[str, Any]:
    """{"prior": {key: value}, "oracle": {key: value}}: the headline values of the family's prior and ceiling
    models on `dataset`, run with the same arguments and --limit and scored (metrics.json alone: `metrics_only`);
    cached by content (mmfaith.cache) so a suite pays once."""
    from mmfaith.evaluators.profile import headline, values
    from mmfaith.evaluators.reference_server import ReferenceServer
    from mmfaith.evaluators.score_dir import metrics_only

    fam = families.get(family)
    key = hashlib.sha256(canonical_json({"family": family, "dataset": dataset, "run": list(run_args),
                                         "limit": args.limit, "seed": getattr(args, "seed", 0),
                                         "no_image": args.no_image, "circular": args.circular,
                                         "mmfaith": __version__}).encode("utf-8")).hexdigest()
    cache = ContentCache(ENDS_CACHE)
    found = cache.get(key)
    if found is not None:
        return found
    ends: dict[str, Any] = {}
    shared = argparse.Namespace(**{**vars(args), "no_progress": True, "concurrency": 16})
    opened = fam.parts().open_dataset(dataset)
    print(f"{family}: scoring its prior and {fam.ceiling} on the same dataset (once; cached) ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="mmfaith-ends-") as scratch, contextlib.redirect_stdout(io.StringIO()), \
            metrics_only():  # only the metrics are read: no report, no plots
        for role, model in (("prior", "prior"), ("oracle", fam.ceiling)):
            run_dir, score_dir = Path(scratch) / "runs" / role, Path(scratch) / "scores" / role
            with ReferenceServer(opened, model, family=family) as server:
                run_one(family, dataset, run_args, shared, model, (server.base_url,), run_dir)
            score_one(family, dataset, run_dir, score_dir, getattr(args, "seed", 0), explorer=False)
            ends[role] = values(headline(fam, json.loads((score_dir / "metrics.json").read_text(encoding="utf-8"))))
    cache.put(key, ends, family=family, dataset=dataset)
    return ends


def _images_per_request(suite: Suite, names: list[str]) -> int:
    """The most images one request of any chosen family shows (what a vLLM server started for all must allow)."""
    from mmfaith.cli import parser
    from mmfaith.evaluators.run_cli import family_plan, images_per_request

    root = parser()
    return max(images_per_request(family_plan(root.parse_args(["run", name, "--dataset", "-", "--out", "-",
                                                               *suite.entry(name).run]), families.get(name)))
               for name in names)


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _provenance(args: argparse.Namespace, suite: Suite, names: list[str]) -> dict[str, Any]:
    """What made the profile, nothing that changes with when or how often it ran (module docstring)."""
    return {"mmfaith": __version__, "suite": {**suite.identity(), "path": str(suite.path)}, "families": names,
            "limit": args.limit, "seed": getattr(args, "seed", 0), "no_image": args.no_image,
            "circular": args.circular, "generation": {"temperature": args.temperature, "max_tokens": args.max_tokens},
            "served_by": "vllm" if args.serve else "base-url"}
