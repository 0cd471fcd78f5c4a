"""`mmfaith score spd-faith` and `mmfaith report` end to end on a real build of the embedded sample.

Predictions are written here from the gold records: an oracle (answers exactly what the gold
says, in the probes' format) must score perfectly, a blind model (sees nothing) must score zero.
The LLM judge is tested against a real local HTTP server (tests/chat_server.py).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.clients import ModelEndpoint
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.spd_faith.judge import PROMPT_SHA256
from mmfaith.evaluators.score_cli import register
from mmfaith.evaluators.spd_faith.report import compare_scores
from mmfaith.evaluators.spd_faith.score import ScoreRequest, load_predictions, score_spd_faith
from mmfaith.jsonl import read_jsonl
from mmfaith.loaders.spd_faith import open_spd_dataset
from mmfaith.schema import schema_errors
from tests.chat_server import ChatServer, request_text
from tests.conftest import read_records

PERFECT = ("DS", "DQR", "existence_rate", "TF1", "CF1", "consistency_ratio", "DRF", "DRF_coverage")
FILES = ("metrics.json", "items.jsonl", "report.md", "metrics_by_difficulty.png", "drf_errors.png", "yes_ratio_same.png")


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The brief's build: 3 pairs per tier, 4 multi-difference pairs, 2 controls asked for. Under the builder's
    naturalness gates and refusals (issue 29) the embedded sample gives fewer (no easy pair, no multi pair of 3 or
    more differences), so the tests derive their counts from the records (`counts_of`)."""
    out = tmp_path_factory.mktemp("score-build")
    build_spd_faith(BuildRequest(out=out, per_tier=3, multi=4, controls=2, seed=0, progress=False))
    return out


def counts_of(build: Path) -> tuple[int, int, int]:
    """(items, scored items, controls) of the build: scored items are those with at least one difference."""
    records = read_records(build)
    n_control = sum(1 for r in records if r["num_differences"] == 0)
    return len(records), len(records) - n_control, n_control


def judge_prompts(build: Path) -> int:
    """The distinct judge prompts of an oracle over the build: one per distinct gold list among the items with
    differences (two pairs that edit one object alike, one in each tier, share theirs) and one for the controls."""
    records = read_records(build)
    return len({gold_list(r) for r in records if r["num_differences"]}) + any(not r["num_differences"] for r in records)


def gold_list(record: dict[str, Any]) -> str:
    listed = [{"type": d["type"], "object": d["category"], "detail": d["description"]} for d in record["differences"]]
    return "I compare both pictures object by object.\n```json\n" + json.dumps(listed) + "\n```\n"


def oracle_responses(record: dict[str, Any]) -> dict[str, str]:
    g = record["num_differences"]
    return {"same": gold_list(record) + ("\\boxed{no}" if g else "\\boxed{yes}"),
            "different": gold_list(record) + ("\\boxed{yes}" if g else "\\boxed{no}"),
            "count": f"Counting the changes. \\boxed{{{g}}}",
            "describe": gold_list(record) + f"\\boxed{{{g}}}"}


def blind_responses(record: dict[str, Any]) -> dict[str, str]:
    return {"same": "They look identical. \\boxed{yes}", "different": "No change. \\boxed{no}",
            "count": "\\boxed{0}", "describe": "```json\n[]\n```\n\\boxed{0}"}


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def prediction_lines(build: Path, responses: Any, model: str) -> list[dict[str, Any]]:
    return [{"id": r["id"], "probe": probe, "response": text, "model": model}
            for r in read_records(build) for probe, text in responses(r).items()]


def score(build: Path, predictions: Path, out: Path, **options: Any) -> dict[str, Any]:
    return score_spd_faith(ScoreRequest(dataset=build, predictions=predictions, out=out,
                                        n_bootstrap=options.pop("n_bootstrap", 200), **options))


def assert_valid_outputs(out: Path) -> list[dict[str, Any]]:
    for name in FILES:
        assert (out / name).is_file(), name
    assert schema_errors("spd_faith_metrics", json.loads((out / "metrics.json").read_text())) == []
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    for item in items:
        assert schema_errors("spd_faith_item_scores", item) == [], item["id"]
    return items


def test_oracle_scores_perfectly(build: Path, tmp_path: Path) -> None:
    metrics = score(build, write_lines(tmp_path / "oracle.jsonl", prediction_lines(build, oracle_responses, "oracle")),
                    tmp_path / "score")
    items = assert_valid_outputs(tmp_path / "score")
    overall = metrics["overall"]
    for name in PERFECT:
        assert overall[name] == 1.0, name
        assert metrics["ci95"][name] == [1.0, 1.0], name
    assert overall["contradiction_rate"] == 0.0
    assert overall["yes_ratio_same"] == 0.0
    assert metrics["control"]["false_alarm_rate"] == 0.0
    assert overall["DRF_errors"] == {k: 0 for k in overall["DRF_errors"]}
    # Every group with items scores perfectly; a group the build has no pair in (the embedded sample's easy tier since
    # vases are not recoloured) has its DQR undefined, never 0 or 1.
    groups = Counter(r["difficulty"] or r["subset"] for r in read_records(build) if r["num_differences"])
    assert groups, "the build has no pair with differences"
    for group in ("easy", "medium", "hard", "multi"):
        block = metrics["by_difficulty"][group]
        assert block["n_items"] == groups[group]
        assert block["DQR"] == (1.0 if groups[group] else None), group
    counts = metrics["counts"]
    assert (counts["n_items"], counts["n_scored"], counts["n_control"]) == counts_of(build)
    assert sum(counts["n_missing"].values()) + sum(counts["n_unparsed"].values()) + counts["n_errors"] == 0
    provenance = metrics["provenance"]
    assert provenance["model"] == "oracle" and provenance["judge"]["name"] == "rule"
    assert provenance["dataset"]["revision"] and len(provenance["prompt_templates_sha256"]) == 64
    assert metrics["definitions_version"] == items[0]["definitions_version"]
    assert [item["id"] for item in items] == [r["id"] for r in read_records(build)]
    report = (tmp_path / "score" / "report.md").read_text()
    assert "oracle" in report and provenance["dataset"]["id"] in report and "| DQR | 1.000 [1.000, 1.000] |" in report


def test_blind_model_scores_zero_and_is_not_rewarded_for_silence(build: Path, tmp_path: Path) -> None:
    metrics = score(build, write_lines(tmp_path / "blind.jsonl", prediction_lines(build, blind_responses, "blind")),
                    tmp_path / "score")
    overall = metrics["overall"]
    assert (overall["DS"], overall["DQR"], overall["existence_rate"]) == (0.0, 0.0, 0.0)
    assert (overall["TF1"], overall["CF1"]) == (0.0, 0.0)  # no claims: precision 0, recall 0
    assert overall["DRF"] is None and overall["DRF_coverage"] == 0.0  # silence: undefined DRF, coverage 0
    # no claims on any item with a difference: every scored item is left out of the consistency ratio
    n_scored = counts_of(build)[1]
    assert overall["consistency_ratio"] is None and overall["n_left_out"]["consistency_ratio"] == n_scored
    assert overall["contradiction_rate"] == 0.0 and overall["yes_ratio_same"] == 1.0
    assert metrics["control"]["false_alarm_rate"] == 0.0  # a blind model never cries wolf


def test_scoring_twice_gives_identical_bytes(build: Path, tmp_path: Path) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    score(build, predictions, tmp_path / "a", seed=7)
    score(build, predictions, tmp_path / "b", seed=7)
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_pairs_scored_in_chunks_on_worker_processes_give_the_bytes_of_one_process(build: Path, tmp_path: Path) -> None:
    """--workers N: chunks of pairs judged and scored on forked processes, merged in dataset order: the same
    items.jsonl and metrics.json (answer tally and counts included) as one process scoring every pair."""
    mixed = {r["id"]: (oracle_responses if k % 3 else blind_responses) for k, r in enumerate(read_records(build))}
    lines = [line for line in prediction_lines(build, lambda r: mixed[r["id"]](r), "m")
             if (line["id"], line["probe"]) != (next(iter(mixed)), "count")]  # a missing answer, a free-text one
    lines[1]["response"] = "The mug on the left turned red; nothing else changed."
    predictions = write_lines(tmp_path / "p.jsonl", lines)
    one = score(build, predictions, tmp_path / "one", workers=1)
    chunked = score(build, predictions, tmp_path / "chunked", workers=3, chunk=2)  # 6 chunks of 12 pairs, 3 processes
    assert chunked == one and 0 < one["overall"]["DQR"] < 1
    for name in ("items.jsonl", "metrics.json", "report.md"):
        assert (tmp_path / "chunked" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name


def test_missing_truncated_and_unparsed_answers_are_counted_and_scored(build: Path, tmp_path: Path) -> None:
    records = [r for r in read_records(build) if r["num_differences"] > 0]
    first, second, third = (r["id"] for r in records[:3])
    lines = [line for line in prediction_lines(build, oracle_responses, "m")
             if not (line["id"] == first and line["probe"] in ("count", "describe"))]  # two missing probes
    for line in lines:
        if line["id"] == second and line["probe"] == "count":  # cut by the token limit before its answer
            line.update(response="Let me count: the first", meta={"finish_reason": "length"})
        if line["id"] == third and line["probe"] == "count":  # no answer to read
            line["response"] = "Several things differ."
    lines.append({"id": first, "probe": "count", "response": None, "model": "m", "meta": {"error": "HTTP 500"}})
    metrics = score(build, write_lines(tmp_path / "p.jsonl", lines), tmp_path / "score")
    counts = metrics["counts"]
    assert counts["n_missing"] == {"same": 0, "different": 0, "count": 1, "describe": 1}
    assert counts["n_truncated"] == {"same": 0, "different": 0, "count": 1, "describe": 0}
    assert counts["n_unparsed"] == {"same": 0, "different": 0, "count": 1, "describe": 0}
    assert counts["n_errors"] == 1  # the failed call is not an answer: count stays missing
    # missing, truncated and unparsed counts all score 0 on DQR: n - 3 of the n scored items right
    # (n = 10 on this build: 7/10)
    n_scored = counts_of(build)[1]
    assert metrics["overall"]["DQR"] == pytest.approx((n_scored - 3) / n_scored, abs=1e-6)
    # the item without describe has no claims: DRF averages the n - 1 others, coverage (n - 1)/n (9/10)
    assert metrics["overall"]["DRF"] == 1.0
    assert metrics["overall"]["DRF_coverage"] == pytest.approx((n_scored - 1) / n_scored, abs=1e-6)
    items = {item["id"]: item for item in assert_valid_outputs(tmp_path / "score")}
    assert items[first]["answers"]["describe"] == {"status": "missing", "value": None, "order": None}
    assert items[second]["answers"]["count"]["status"] == "truncated"


def test_malformed_submission_is_rejected_with_every_bad_line(build: Path, tmp_path: Path) -> None:
    record = read_records(build)[0]
    good = {"id": record["id"], "probe": "same", "response": "\\boxed{no}", "model": "m"}
    path = tmp_path / "submission.jsonl"
    path.write_text("\n".join([
        json.dumps(good),                                                  # 1 fine
        '{"id": "x", "probe": ',                                           # 2 bad JSON
        json.dumps({"id": record["id"], "probe": "count", "response": "1"}),  # 3 no model (schema)
        json.dumps({**good, "id": "spdf-0000000000000000"}),               # 4 unknown id
        json.dumps({**good, "probe": "colour"}),                           # 5 unknown probe
        json.dumps({**good, "response": "\\boxed{yes}"}),                  # 6 second answer to (id, same)
        json.dumps({**good, "probe": "count", "response": 3}),             # 7 wrong type
        json.dumps({**good, "probe": "different", "response": None, "meta": {"latency_s": 1.0}}),  # 8 failed, no error
        json.dumps({**good, "probe": "describe", "model": "other"}),       # 9 a second model
        "[1, 2]",                                                          # 10 not an object
    ]) + "\n")
    with pytest.raises(MmfaithError) as caught:
        score(build, path, tmp_path / "score")
    message = str(caught.value)
    found = [int(n) for n in re.findall(r"line (\d+):", message)]
    assert found == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    for reason in ("not valid JSON", "'model' is a required property", "unknown id", "unknown probe 'colour'",
                   "a second answer", "first on line 1", "--from-run", "is not of type", "'error' is a required",
                   "differs from 'm'"):
        assert reason in message, reason
    assert not (tmp_path / "score").exists()  # nothing written for a rejected submission


def test_from_run_takes_the_last_answer_and_ignores_failed_calls(build: Path, tmp_path: Path) -> None:
    records = read_records(build)
    lines = prediction_lines(build, oracle_responses, "m")
    target = next(r for r in records if r["num_differences"] > 0)
    retry = [{"id": target["id"], "probe": "count", "response": "\\boxed{0}", "model": "m"},  # an earlier wrong answer
             {"id": target["id"], "probe": "count", "response": None, "model": "m", "meta": {"error": "timeout"}}]
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in retry + lines) + '{"id": "torn')  # crash mid-write
    with pytest.raises(MmfaithError) as caught:  # as a submission: two answers to (id, count), and a torn line
        score(build, path, tmp_path / "rejected")
    # lines: 1 wrong count, 2 failed call, 3.. the oracle's (target first: same 3, different 4, count 5), torn last
    assert [int(n) for n in re.findall(r"line (\d+):", str(caught.value))] == [5, len(retry) + len(lines) + 1]
    metrics = score(build, path, tmp_path / "score", from_run=True)
    assert metrics["overall"]["DQR"] == 1.0  # the oracle's later answer won
    assert metrics["counts"]["n_errors"] == 1
    assert metrics["provenance"]["predictions_mode"] == "run"
    assert len(load_predictions(path, open_spd_dataset(build), from_run=True).answers) == 4 * len(records)


def test_report_compares_models_with_paired_intervals_and_mcnemar(build: Path, tmp_path: Path) -> None:
    for name, responses in (("oracle", oracle_responses), ("blind", blind_responses)):
        score(build, write_lines(tmp_path / f"{name}.jsonl", prediction_lines(build, responses, name)), tmp_path / name)
    comparison = compare_scores([tmp_path / "oracle", tmp_path / "blind"], tmp_path / "cmp", n_bootstrap=200, seed=0)
    pair = comparison["pairs"][0]
    n = counts_of(build)[1]  # the scored items (10 on this build)
    assert (pair["a"], pair["b"], pair["n_shared"]) == ("oracle", "blind", n)
    assert pair["difference"]["DQR"] == {"value": 1.0, "ci95": [1.0, 1.0]}
    # oracle right and blind wrong on all n items: b = n, c = 0, p = 2 * 0.5^n
    # Clustered (Durkalski): every discordant pair is b, so b_k - c_k is the number of scored items of source
    # image k: X^2 = n^2 / sum_k n_k^2, p = erfc(sqrt(X^2 / 2)).
    sizes = Counter(item["cluster"] for _, item in read_jsonl(tmp_path / "oracle" / "items.jsonl")
                    if item["num_differences"] > 0)
    assert sum(sizes.values()) == n
    clustered = round(math.erfc(math.sqrt(n ** 2 / sum(k * k for k in sizes.values()) / 2)), 6)
    assert pair["mcnemar"]["DQR"] == {"a_only": n, "b_only": 0, "p_value": round(2 * 0.5 ** n, 6),
                                      "p_clustered": clustered}
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "| metric | oracle | blind |" in report and "oracle minus blind" in report and "## hard" in report
    for plot in ("compare_overall.png", "compare_by_difficulty.png"):
        assert (tmp_path / "cmp" / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mmfaith")
    register(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_cli_verbs_score_and_report(build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    assert run_cli(["score", "spd-faith", "--dataset", str(build), "--predictions", str(predictions),
                    "--out", str(tmp_path / "s"), "--bootstrap", "50", "--seed", "3"]) == 0
    assert "DQR 1.000" in capsys.readouterr().out
    assert json.loads((tmp_path / "s" / "metrics.json").read_text())["provenance"]["bootstrap"]["n"] == 50
    assert run_cli(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "report.md").is_file()
    with pytest.raises(MmfaithError, match="--judge MODEL"):
        run_cli(["score", "spd-faith", "--dataset", str(build), "--predictions", str(predictions),
                 "--out", str(tmp_path / "x"), "--judge-agreement"])


# ---- the LLM judge, against a real HTTP server -------------------------------------------------

def _gold_of_prompt(text: str) -> list[dict[str, Any]]:
    section = text.split("True differences", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    rows = [] if section == "(none)" else [re.match(r"\d+: (\w+), ([^,]+), ([^,]+), ", line).groups()
                                           for line in section.splitlines()]
    return [{"type": t, "category": c, "color": None if color == "-" else color} for t, c, color in rows]


def judge_reply(drf_label: str = "faithful", describe: bool = True) -> Any:
    """A scripted judge: claims = the gold listed in its prompt, pairs labelled one to one."""
    def reply(body: dict[str, Any]) -> str:
        claims = _gold_of_prompt(request_text(body))
        return json.dumps({"claims": {"same": claims, "different": claims, "describe": claims if describe else []},
                           "drf": [{"claim": i, "gold": i, "label": drf_label} for i in range(len(claims))] if describe else [],
                           "consistency": [{"same": i, "different": i, "label": "consistent"} for i in range(len(claims))]})
    return reply


def llm_score(build: Path, predictions: Path, out: Path, server: ChatServer, **options: Any) -> dict[str, Any]:
    return score(build, predictions, out, judge=ModelEndpoint("openai", "judge-model", server.openai_base_url), **options)


def test_llm_judge_scores_from_its_labels_and_caches(build: Path, tmp_path: Path, own_cache_dir: Path) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    # one call per distinct prompt: one per distinct gold list of the items with differences, one for the controls
    prompts = judge_prompts(build)
    with ChatServer(default=judge_reply()) as server:
        metrics = llm_score(build, predictions, tmp_path / "s", server, judge_agreement=True)
        assert len(server.completion_requests()) == prompts
        before = (tmp_path / "s" / "metrics.json").read_bytes()
        llm_score(build, predictions, tmp_path / "s", server, judge_agreement=True)
        assert len(server.completion_requests()) == prompts  # every answer came from the cache
        assert (tmp_path / "s" / "metrics.json").read_bytes() == before
    assert "Are the two pictures the same?" in request_text(server.completion_requests()[0].body)
    for name in PERFECT:
        assert metrics["overall"][name] == 1.0, name
    judge = metrics["provenance"]["judge"]
    assert (judge["name"], judge["provider"], judge["prompt_sha256"], judge["fallbacks"]) == \
        ("judge-model", "openai", PROMPT_SHA256, 0)
    assert metrics["judge_agreement"]["claims_multiset"] == 1.0  # the rules read the oracle's JSON the same way
    assert "Judge agreement" in (tmp_path / "s" / "report.md").read_text()
    items = assert_valid_outputs(tmp_path / "s")
    assert {item["claims_source"]["describe"] for item in items} == {"llm"}
    assert len(list((own_cache_dir / "judge").rglob("*.json"))) == prompts
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if "cache" in p.name) == []


def test_replacing_a_score_folder_keeps_the_paid_for_judge_answers(build: Path, tmp_path: Path) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    with ChatServer(default=judge_reply()) as server:
        llm_score(build, predictions, tmp_path / "s", server)
        asked = len(server.completion_requests())
        before = {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()}
        shutil.rmtree(tmp_path / "s")
        llm_score(build, predictions, tmp_path / "s", server)
        llm_score(build, predictions, tmp_path / "elsewhere", server)
        assert len(server.completion_requests()) == asked == judge_prompts(build)  # nothing asked twice
    assert {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()} == before


def test_llm_judge_labels_not_arithmetic_drive_the_metrics(build: Path, tmp_path: Path) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    with ChatServer(default=judge_reply(drf_label="attribute_error")) as server:
        metrics = llm_score(build, predictions, tmp_path / "s", server)
    n_gold = sum(r["num_differences"] for r in read_records(build))
    assert metrics["overall"]["DRF"] == 0.0  # every claim labelled an attribute error: 0 faithful
    assert metrics["overall"]["DRF_errors"]["attribute_error"] == n_gold
    assert metrics["overall"]["TF1"] == 1.0  # TF1 comes from the claims, which are right


def test_llm_judge_disagreement_and_fallback_on_bad_answers(build: Path, tmp_path: Path) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    # the first item's two attempts get unusable answers (not JSON; an index out of range), then the script
    bad_index = json.dumps({"claims": {"same": [], "different": [], "describe": []},
                            "drf": [{"claim": 5, "gold": 0, "label": "faithful"}], "consistency": []})
    with ChatServer(["not json at all", bad_index], default=judge_reply(describe=False)) as server:
        metrics = llm_score(build, predictions, tmp_path / "s", server, judge_workers=1, judge_agreement=True)
        retry = request_text(server.completion_requests()[1].body)
    assert "Your previous reply was not usable (no JSON object in the answer)" in retry
    assert metrics["provenance"]["judge"]["fallbacks"] == 1
    items = assert_valid_outputs(tmp_path / "s")
    assert items[0]["claims_source"] == {"same": "rule-fallback", "different": "rule-fallback",
                                         "describe": "rule-fallback"}
    # describe: the LLM saw no claims where the rules read the gold list; they agree on the controls
    # (both empty) and the fallback item (rules on both sides): (controls + 1) of all items, 3 of 12 here
    n_items, n_scored, n_control = counts_of(build)
    assert metrics["judge_agreement"]["by_probe"]["describe"] == pytest.approx((n_control + 1) / n_items, abs=1e-6)
    assert metrics["judge_agreement"]["by_probe"]["same"] == 1.0
    # DRF divides by K, the model's self-reported count (the oracle's count is the gold's, >= 1 on all n
    # items with a difference): every item is defined; only the fallback item has claims, all faithful
    # (K of K: 1), the n - 1 others list none of their K differences (0): DRF = 1 / n (1/10 here)
    assert metrics["overall"]["DRF_coverage"] == 1.0
    assert metrics["overall"]["DRF"] == pytest.approx(1 / n_scored, abs=1e-6)


def test_unreachable_judge_is_one_clear_error(build: Path, tmp_path: Path) -> None:
    predictions = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    with ChatServer(default=503, retry_after_ms=1) as server:
        with pytest.raises(MmfaithError, match=r"judge judge-model at http://127\.0\.0\.1:\d+/v1 failed .*--judge-base-url"):
            llm_score(build, predictions, tmp_path / "s", server, judge_workers=1)
    assert not (tmp_path / "s" / "metrics.json").exists()


# -- what score refuses, and what it tells ---------------------------------------------------------

def cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from mmfaith.cli import main

    code = main(list(args))
    message = capsys.readouterr().err
    assert code == 2, message
    assert message.startswith("mmfaith: error: ") and message.count("\n") == 1, message
    return message


def test_predictions_with_no_answer_at_all_are_refused(build: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    failed = [{**line, "response": None, "meta": {"error": "HTTP 401: bad key"}}
              for line in prediction_lines(build, oracle_responses, "m")]
    path = write_lines(tmp_path / "p.jsonl", failed)
    message = cli_error(capsys, "score", "spd-faith", "--dataset", str(build), "--predictions", str(path),
                        "--from-run", "--out", str(tmp_path / "s"))
    assert str(path) in message and "no answer at all" in message and f"{len(failed)} failed calls" in message
    assert not (tmp_path / "s").exists()


def test_the_answered_share_is_counted(build: Path, tmp_path: Path) -> None:
    lines = prediction_lines(build, oracle_responses, "m")
    metrics = score(build, write_lines(tmp_path / "p.jsonl", lines[: len(lines) // 4]), tmp_path / "s")
    assert metrics["counts"]["n_answered"] == len(lines) // 4
    assert metrics["counts"]["answered_share"] == round((len(lines) // 4) / len(lines), 6)
    assert json.loads((tmp_path / "s" / "metrics.json").read_text())["counts"]["answered_share"] < 0.3


def test_score_out_that_is_a_file_is_one_line(build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "p.jsonl", prediction_lines(build, oracle_responses, "m"))
    (tmp_path / "s").write_text("mine")
    message = cli_error(capsys, "score", "spd-faith", "--dataset", str(build), "--predictions", str(path),
                        "--out", str(tmp_path / "s"))
    assert f"score --out {tmp_path / 's'}: is a file, not a folder" in message
    assert (tmp_path / "s").read_text() == "mine"


def test_score_out_into_a_foreign_folder_is_refused_unless_overwrite(build: Path, tmp_path: Path) -> None:
    oracle = write_lines(tmp_path / "oracle.jsonl", prediction_lines(build, oracle_responses, "oracle"))
    blind = write_lines(tmp_path / "blind.jsonl", prediction_lines(build, blind_responses, "blind"))
    out = tmp_path / "s"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    with pytest.raises(MmfaithError, match=r"not empty \(notes.txt\).*--overwrite"):
        score(build, oracle, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    score(build, oracle, out, overwrite=True)  # replaced whole
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    before = (out / "metrics.json").read_bytes()
    (out / "stale.png").write_bytes(b"old plot")
    score(build, oracle, out)  # a previous score of the same inputs: replaced whole, same bytes
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES) and (out / "metrics.json").read_bytes() == before
    with pytest.raises(MmfaithError, match="not a score of these predictions"):
        score(build, blind, out)  # other predictions: refused, the oracle's score stays
    assert (out / "metrics.json").read_bytes() == before
    with pytest.raises(MmfaithError, match="holds the --predictions input"):
        score(build, oracle.rename(out / "p.jsonl"), out, overwrite=True)
    assert not list(tmp_path.glob(".s.*"))  # no staging folder left behind
