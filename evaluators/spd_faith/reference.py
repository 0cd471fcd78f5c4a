"""Deterministic reference models for SPD-Faith: an oracle, a blind model and a pixel differ.

Contract
--------
A model turns a `ProbeQuery` (the pair found from the request's images, the order they were
shown in, the probe, and the images' PNG bytes) into `(reasoning, claims)`: one sentence and the
differences it reports, each `{"type": color|remove|position, "object", "detail"}`, told in the
order shown (the first picture, then the second). `answer(model, query)` renders them in the
probe's format (evaluators/spd_faith/prompts.py): the reasoning, a fenced ```json list of the claims for
`same`, `different` and `describe`, and the final answer in \\boxed{}: `same` -> yes exactly when
there are no claims, `different` -> the opposite, `count` and `describe` -> the number of claims.

- `oracle`: the gold differences (category as object; detail "red to blue", "only in the first
  picture", "moved from the left to the top right"). Every metric scored on it reads perfect.
- `blind`: ignores the images; no claims, so "same? yes", "different? no", count 0.
- `prior`: reads neither the images nor the pair's gold; each probe's answer is the template-level
  prior of mmfaith/prior.py, leave one out (the most frequent gold among the OTHER pairs, controls
  included): `same` -> the most frequent "same?" gold ("no" when most pairs differ), `different` ->
  the most frequent "different?" gold, `count` -> the most frequent number of differences,
  `describe` -> that many claims, the most frequent (type, category) differences of the other pairs
  (detail "changed"). `same` and `different` list those claims when they answer that the pictures
  differ. Without images (`run --no-image`) every request is the same text, so it answers them all
  as it answers the dataset's first pair.
- `pixel-diff`: compares the two images, no weights: pixels whose largest channel difference
  exceeds DIFF_THRESHOLD, an opening and a closing, connected regions of at least MIN_AREA_FRACTION
  of the image. One claim per region, located ("top left") with object "object"; its type from
  simple cues: edges kept inside the region while colors changed -> color; otherwise two regions of
  similar size -> position; else remove.
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Protocol

import cv2
import numpy as np

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.image_payload import decode_png, split_side_by_side
from mmfaith.evaluators.reference_server import RequestRefused
from mmfaith.evaluators.spd_faith.prompts import probe_of_prompt
from mmfaith.images import place_name, png_size, sha256_bytes
from mmfaith.prior import leave_one_out_prior
from mmfaith.loaders.spd_faith.dataset import SpdDataset, SpdPair

Claim = dict[str, str]

DIFF_THRESHOLD = 12
OPEN_PX = 3
CLOSE_PX = 9
MIN_AREA_FRACTION = 0.0002
MIN_AREA_PX = 64
EDGE_MAGNITUDE = 40.0
COLOR_EDGE_IOU = 0.5
POSITION_AREA_RATIO = 0.6


@dataclass(frozen=True)
class ProbeQuery:
    """One request, resolved: which pair, shown in which order, which probe, and the images sent."""

    pair: SpdPair
    order: str  # "original-first" or "edited-first"
    probe: str
    first_png: bytes
    second_png: bytes
    first_sha256: str
    second_sha256: str


class ClaimModel(Protocol):
    name: str

    def claims(self, query: ProbeQuery) -> tuple[str, list[Claim]]:
        """(one reasoning sentence, the differences seen, in the order shown)."""


def answer(model: ClaimModel, query: ProbeQuery) -> str:
    """The model's full answer to the query's probe (format in the module docstring)."""
    reasoning, claims = model.claims(query)
    final = {"same": "no" if claims else "yes", "different": "yes" if claims else "no"}.get(query.probe, len(claims))
    listing = [] if query.probe == "count" else ["```json\n" + json.dumps(claims) + "\n```"]
    return "\n".join([reasoning, *listing, f"\\boxed{{{final}}}"])


def _reasoning(claims: list[Claim], how: str) -> str:
    if not claims:
        return f"{how}, I find no difference between the two pictures."
    listed = "; ".join(f"the {c['object']} ({c['type']}: {c['detail']})" for c in claims)
    return f"{how}, I find {len(claims)} difference{'s' if len(claims) > 1 else ''}: {listed}."


class Oracle:
    """Answers from the gold record (module docstring)."""

    name = "oracle"

    def claims(self, query: ProbeQuery) -> tuple[str, list[Claim]]:
        width, height = png_size(query.first_png)
        original_first = query.order == "original-first"
        found = []
        for difference in query.pair.record["differences"]:
            before, after = difference["color_before"], difference["color_after"]
            if difference["type"] == "color":
                shown = (before, after) if original_first else (after, before)
                detail = f"{shown[0]} to {shown[1]}" if None not in shown else "changed color"
            elif difference["type"] == "remove":
                detail = f"only in the {'first' if original_first else 'second'} picture"
            elif difference["bbox_before"] is None or difference["bbox_after"] is None:
                detail = "moved to another place"  # an official import: the destination is not recorded
            else:
                places = [place_name(x + w / 2, y + h / 2, width, height)
                          for x, y, w, h in (difference["bbox_before"], difference["bbox_after"])]
                if not original_first:
                    places.reverse()
                detail = f"moved from the {places[0]} to the {places[1]}"
            found.append({"type": difference["type"], "object": difference["category"], "detail": detail})
        return _reasoning(found, "Comparing the two pictures object by object"), found


class Blind:
    """Ignores the images: sees no difference."""

    name = "blind"

    def claims(self, query: ProbeQuery) -> tuple[str, list[Claim]]:
        return _reasoning([], "Looking at the pictures"), []


class PixelDiff:
    """Compares the pixels of the two images (module docstring); results cached per image pair."""

    name = "pixel-diff"

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], list[Claim]] = {}
        self._lock = threading.Lock()

    def claims(self, query: ProbeQuery) -> tuple[str, list[Claim]]:
        key = (query.first_sha256, query.second_sha256)
        with self._lock:  # one comparison at a time: the four probes of a pair wait for the first
            found = self._cache.get(key)
            if found is None:
                found = self._cache[key] = pixel_claims(decode_png(query.first_png), decode_png(query.second_png))
        return _reasoning(found, "Comparing the two pictures pixel by pixel"), found


class Prior:
    """Answers every probe from the other pairs' golds (module docstring); built over a dataset."""

    name = "prior"

    def __init__(self, dataset: SpdDataset) -> None:
        pairs = dataset.pairs
        same = leave_one_out_prior((p.id, "same", "no" if p.record["differences"] else "yes") for p in pairs)
        self._same = same
        self._count = leave_one_out_prior((p.id, "count", len(p.record["differences"])) for p in pairs)
        kinds = {p.id: Counter((d["type"], d["category"]) for d in p.record["differences"]) for p in pairs}
        total = sum(kinds.values(), Counter())
        self._claims = {}
        for p in pairs:
            ranked = sorted((total - kinds[p.id]).items(), key=lambda kv: (-kv[1], kv[0]))
            self._claims[p.id] = [{"type": kind, "object": category, "detail": "changed"}
                                  for (kind, category), _ in ranked[:self._count[p.id] or 0]]

    def render(self, pair: SpdPair, probe: str) -> str:
        """The answer to one probe of `pair`, in the format of `answer`."""
        claims, differ = self._claims[pair.id], self._same[pair.id] == "no"
        final = {"same": "no" if differ else "yes", "different": "yes" if differ else "no"}.get(
            probe, self._count[pair.id] or 0)
        listed = claims if probe == "describe" or differ else []
        listing = [] if probe == "count" else ["```json\n" + json.dumps(listed) + "\n```"]
        return "\n".join(["Answering from how such questions usually go, without the pictures.", *listing,
                          f"\\boxed{{{final}}}"])


MODELS: dict[str, Callable[[], ClaimModel]] = {"oracle": Oracle, "blind": Blind, "pixel-diff": PixelDiff}


class SpdReference:
    """A reference model over an SPD-Faith dataset, as the shared reference server serves it.

    Resolves a request to (pair, order, probe): two images are the pair in the order shown, one
    image is a side-by-side canvas split at its known gap (`image_payload.split_side_by_side`); the
    pair is found by the images' sha256 (the records' image_a_sha256 / image_b_sha256), the probe by
    `prompts.probe_of_prompt`. Anything else is refused (HTTP 400).
    """

    def __init__(self, model_name: str, dataset: SpdDataset) -> None:
        if model_name not in (*MODELS, Prior.name):
            raise MmfaithError(f"--model {model_name!r}: SPD-Faith's reference models are "
                               f"{', '.join((*MODELS, Prior.name))}.")
        self.prior = Prior(dataset) if model_name == Prior.name else None
        self.model = MODELS[model_name]() if self.prior is None else None
        self.name = model_name
        self._pairs: dict[tuple[str, str], tuple[SpdPair, str]] = {}
        for pair in dataset.pairs:  # a control pair shows one image twice: it is "original-first"
            a, b = pair.record["image_a_sha256"], pair.record["image_b_sha256"]
            self._pairs.setdefault((a, b), (pair, "original-first"))
            self._pairs.setdefault((b, a), (pair, "edited-first"))
        self._some_pair = dataset.pairs[0]
        self._canvases: dict[str, tuple[bytes, bytes]] = {}
        self._split_lock = threading.Lock()

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str:
        """The model's answer to one request (see the class docstring)."""
        probe = probe_of_prompt(text)
        if probe is None:
            raise RequestRefused(400, "the text is not an SPD-Faith probe (see evaluators/spd_faith/prompts.py)")
        if self.prior is not None and not images:
            return self.prior.render(self._some_pair, probe)  # no image: every pair's prior is asked alike
        if len(images) == 1:
            first, second = self._split(images[0])
        elif len(images) == 2:
            first, second = images
        else:
            raise RequestRefused(400, f"expected two images or one side-by-side image, got {len(images)}")
        shas = (sha256_bytes(first), sha256_bytes(second))
        found = self._pairs.get(shas)
        if found is None:
            raise RequestRefused(400, "the images are not a pair of this server's dataset (matched by sha256)")
        pair, order = found
        if self.prior is not None:
            return self.prior.render(pair, probe)
        assert self.model is not None
        return answer(self.model, ProbeQuery(pair, order, probe, first, second, *shas))

    def _split(self, canvas: bytes) -> tuple[bytes, bytes]:
        """The two pictures of a side-by-side canvas, made once per canvas (its four probes arrive together)."""
        key = sha256_bytes(canvas)
        with self._split_lock:  # one split at a time: the probes of one canvas wait for the first
            halves = self._canvases.get(key)
            if halves is None:
                try:
                    halves = split_side_by_side(canvas)
                except (OSError, ValueError) as exc:
                    raise RequestRefused(400, f"the image cannot be decoded ({exc})") from exc
                if halves is None or (sha256_bytes(halves[0]), sha256_bytes(halves[1])) not in self._pairs:
                    raise RequestRefused(400, "the image is not a side-by-side pair of this server's dataset")
                self._canvases[key] = halves
        return halves


def changed_regions(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """(label image, [(label, x, y, w, h, area)] of each changed region of at least the minimum area)."""
    height, width = first.shape[:2]
    changed = (np.abs(first.astype(np.int16) - second.astype(np.int16)).max(axis=2) > DIFF_THRESHOLD).astype(np.uint8)
    changed = cv2.morphologyEx(changed, cv2.MORPH_OPEN, np.ones((OPEN_PX, OPEN_PX), np.uint8))
    changed = cv2.morphologyEx(changed, cv2.MORPH_CLOSE, np.ones((CLOSE_PX, CLOSE_PX), np.uint8))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(changed, connectivity=8)
    min_area = max(MIN_AREA_PX, MIN_AREA_FRACTION * height * width)
    regions = [(label, *(int(v) for v in stats[label][:5])) for label in range(1, count)
               if stats[label][cv2.CC_STAT_AREA] >= min_area]
    return labels, regions


def _edges(image: np.ndarray) -> np.ndarray:
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
    gradient = np.hypot(cv2.Sobel(gray, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(gray, cv2.CV_32F, 0, 1, ksize=3))
    return gradient > EDGE_MAGNITUDE


def pixel_claims(first: np.ndarray, second: np.ndarray) -> list[Claim]:
    """The pixel-diff model's claims for two RGB images (module docstring)."""
    if first.shape != second.shape:
        return [{"type": "remove", "object": "object", "detail": "the whole picture"}]
    height, width = first.shape[:2]
    labels, regions = changed_regions(first, second)
    edges_first, edges_second = _edges(first), _edges(second)
    kept_edges, any_edges = edges_first & edges_second, edges_first | edges_second
    types, areas = {}, {}
    for label, _, _, _, _, area in regions:
        inside = labels == label
        either = any_edges[inside].sum()
        types[label] = "color" if either and kept_edges[inside].sum() / either >= COLOR_EDGE_IOU else "remove"
        areas[label] = area
    loose = [label for label in types if types[label] == "remove"]
    while loose:  # a move leaves two changed regions of about the object's size
        label = loose.pop(0)
        twin = next((other for other in loose
                     if min(areas[label], areas[other]) / max(areas[label], areas[other]) >= POSITION_AREA_RATIO), None)
        if twin is not None:
            loose.remove(twin)
            types[label] = types[twin] = "position"
    return [{"type": types[label], "object": "object", "detail": place_name(x + w / 2, y + h / 2, width, height)}
            for label, x, y, w, h, _ in regions]
