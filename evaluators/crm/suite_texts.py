"""The texts CRM scoring embeds for the default suite's reference roles: what the package ships vectors for.

Contract
--------
`suite_texts(progress)` builds (or reuses from the cache) the default suite's CRM dataset, runs each
of CRM's reference models (`families.CRM.reference_models`: grounded, the `oracle` role; hallucinator;
prior) against it on a reference server on 127.0.0.1 as `mmfaith evaluate` runs it (the suite's run
arguments), once with the images and once with `--no-image`, and returns every text scoring those
runs embeds (`score.embedded_texts`), sorted, each once. `tools/make_crm_embeddings.py` encodes them
with the real model into the shipped table (evaluators/crm/embedding_cache.py);
tests/crm/test_crm_embedding_cache.py checks the table holds them all, equal to the live model's.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from mmfaith import families
from mmfaith.evaluators.crm.score import embedded_texts, read_crm_predictions
from mmfaith.evaluators.score_settings import ScoreSettings
from mmfaith.loaders.crm import open_crm_dataset
from mmfaith.suite import load_suite, suite_dataset

FAMILY = "crm"


def suite_texts(progress: bool = False) -> list[str]:
    """Every text scoring embeds for the default suite's CRM reference roles (module docstring)."""
    from mmfaith.cli import parser
    from mmfaith.evaluators.evaluate import run_one
    from mmfaith.evaluators.reference_server import ReferenceServer

    suite = load_suite(None)
    source = suite_dataset(suite, FAMILY, progress)
    dataset = open_crm_dataset(source)
    texts: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="mmfaith-crm-texts-") as scratch:
        for model, _ in families.get(FAMILY).reference_models:
            for no_image in (False, True):
                run_dir = Path(scratch) / f"{model}{'-no-image' if no_image else ''}"
                shared = parser().parse_args(["evaluate", "--base-url", "-", "--model", model, "--out", scratch,
                                              "--no-progress", *(["--no-image"] if no_image else [])])
                with ReferenceServer(dataset, model, family=FAMILY) as server:
                    run_one(FAMILY, source, suite.entry(FAMILY).run, shared, model, (server.base_url,), run_dir)
                read = read_crm_predictions(dataset, ScoreSettings(predictions=run_dir / "predictions.jsonl",
                                                                   out=run_dir, from_run=True))
                texts.update(embedded_texts(dataset, {key: line["response"] for key, line in read.answered.items()}))
    return sorted(texts)
