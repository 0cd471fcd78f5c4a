"""`mmfaith evaluate`, `serve-reference --suite`, `report PROFILE_DIR...` and the suite quickstart, end to end:
real reference servers on 127.0.0.1 (in this process and as `mmfaith serve-reference` processes), the real
client, real builds of the embedded COCO sample (the default suite, built once for this module)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith import families
from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.suite_reference import suite_reference_model
from mmfaith.suite import load_suite
from tests.conftest import kill_after_lines

FAMILIES = ["spd-faith", "vfaith", "crm", "mcot"]
MMFAITH = str(Path(sys.executable).parent / "mmfaith")


def _profile(folder: Path) -> dict:
    return json.loads((folder / "profile.json").read_text())


def _values(entry: dict) -> dict:
    return {row["key"]: row["value"] for row in entry["headline"]}


def test_quickstart_profiles_the_oracle_and_the_prior_over_all_four_families(cached: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    assert main(["quickstart", "--out", str(tmp_path), "--no-progress"]) == 0
    shown = capsys.readouterr().out
    assert f"comparison: {tmp_path / 'comparison' / 'report.md'}" in shown and "profiles: " in shown
    oracle, prior = _profile(tmp_path / "profiles" / "oracle"), _profile(tmp_path / "profiles" / "prior")
    for profile, model in ((oracle, "oracle"), (prior, "prior")):
        assert profile["format"] == "mmfaith-profile/1" and profile["model"] == model
        assert sorted(profile["families"]) == sorted(FAMILIES)
        assert profile["suite"] == {"name": "mmfaith-default", "version": "1"}
        assert all(entry["status"] == "ok" and entry["error"] is None for entry in profile["families"].values())
        assert (tmp_path / "profiles" / model / "profile.png").read_bytes()[:4] == b"\x89PNG"
    for name in FAMILIES:
        served_oracle, served_prior = oracle["families"][name], prior["families"][name]
        # The ends (the family's own prior and ceiling run in-process on the dataset) equal what the suite's
        # oracle and prior roles earn over HTTP through `serve-reference --suite`'s model: one truth, two routes.
        assert served_prior["oracle"] == _values(served_oracle) == served_oracle["oracle"]
        assert served_oracle["prior"] == _values(served_prior) == served_prior["prior"]
        assert (tmp_path / "profiles" / "oracle" / served_oracle["score_dir"] / "metrics.json").is_file()
    # The oracle answers from the gold: every SPD-Faith count and F1 is 1, VFaith's accuracies are 1.
    spd = _values(oracle["families"]["spd-faith"])
    assert (spd["DS"], spd["DQR"], spd["TF1"], spd["CF1"], spd["control.false_alarm_rate"]) == (1.0, 1.0, 1.0, 1.0, 0.0)
    vfaith = _values(oracle["families"]["vfaith"])
    assert (vfaith["raw_accuracy"], vfaith["edit_accuracy"], vfaith["perception_accuracy"]) == (1.0, 1.0, 1.0)
    assert oracle["families"]["vfaith"]["headline"][3]["na_reason"]  # repeat ratio: no wrong edited answer
    _check_no_image_pass(tmp_path / "profiles", oracle, prior)
    comparison = json.loads((tmp_path / "comparison" / "comparison.json").read_text())
    assert comparison["models"] == ["oracle", "prior"] and sorted(comparison["families"]) == sorted(FAMILIES)
    # By the definition of the overall share, (value - prior) / (oracle - prior) is 1 for the oracle's own values
    # and 0 for the prior's, in every family where some directed metric separates them.
    assert comparison["overall"]["oracle"]["spd-faith"] == 1.0 and comparison["overall"]["prior"]["spd-faith"] == 0.0
    assert comparison["overall"]["oracle"]["overall"] == 1.0 and comparison["overall"]["prior"]["overall"] == 0.0
    for name in FAMILIES:
        block = comparison["families"][name]
        assert block["pairs"] == 1 and (tmp_path / "comparison" / block["report"]).is_file()
    report = (tmp_path / "comparison" / "report.md").read_text()
    assert "| oracle |" in report and "| prior |" in report and "## CRM (`crm`)" in report
    assert "oracle (no image)" in report and "- oracle: multimodal gain (with the images - without" in report
    assert comparison["families"]["vfaith"]["multimodal_gain"]["oracle"] == \
        oracle["families"]["vfaith"]["no_image"]["multimodal_gain"]


def _check_no_image_pass(profiles: Path, oracle: dict, prior: dict) -> None:
    """The default suite asks every family without the images too (`"no_image": true`): each profile entry holds the
    model's no-image values and its multimodal gain, the family's report over the two score dirs."""
    for profile in (oracle, prior):
        folder = profiles / profile["model"]
        for name in FAMILIES:
            entry = profile["families"][name]
            blind = entry["no_image"]
            assert json.loads((folder / blind["score_dir"] / "metrics.json").read_text())["provenance"]["no_image"]
            assert (folder / blind["report"]).is_file() and blind["multimodal_gain"]["n_items"] > 0
            # MMStar's gain is with - without on the same items; where the gain's key is also a headline metric
            # scored over those very items, it is the difference of the two headline values (by the definition).
            shared = [k for k in blind["multimodal_gain"] if k in blind["values"] and k in _values(entry)]
            assert shared or name in ("crm", "mcot")
            for key in shared:
                with_image, without = _values(entry)[key], blind["values"][key]
                if None not in (with_image, without):
                    assert blind["multimodal_gain"][key]["difference"] == pytest.approx(with_image - without, abs=1e-5)
        assert "| no image |" in (folder / "profile.md").read_text()
    for name in FAMILIES:
        # Asked without images, the suite's oracle cannot find its items (it resolves them by their images), so each
        # family's prior answers for it (evaluators/suite_reference.py): the two roles score alike without images.
        assert oracle["families"][name]["no_image"]["values"] == prior["families"][name]["no_image"]["values"]
    # The oracle's gain in SPD-Faith's DS is its own DS (1) minus what the prior's blind answers earn.
    spd = oracle["families"]["spd-faith"]
    gain = spd["no_image"]["multimodal_gain"]["DS"]["difference"]
    assert gain == pytest.approx(1.0 - spd["no_image"]["values"]["DS"])


def test_evaluate_against_serve_reference_suite_and_report_over_profiles(cached: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    server = subprocess.Popen([MMFAITH, "serve-reference", "--suite", "default", "--model", "prior", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = ""
        while "serving" not in line:
            line = server.stdout.readline()
            assert line, "serve-reference ended before serving"
        assert "the prior role of suite mmfaith-default (spd-faith, vfaith, crm, mcot)" in line
        url = line.split(" at ")[1].split()[0]
        assert main(["evaluate", "--base-url", url, "--model", "prior", "--out", str(tmp_path / "prior"),
                     "--families", "vfaith,mcot", "--no-progress"]) == 0
    finally:
        server.terminate()
        server.wait(timeout=30)
    profile = _profile(tmp_path / "prior")
    assert sorted(profile["families"]) == ["mcot", "vfaith"]
    assert "profile of prior: 2/2 families scored" in capsys.readouterr().out
    with ReferenceServer(None, suite_reference_model(load_suite(None), "oracle")) as oracle:
        assert main(["evaluate", "--base-url", oracle.base_url, "--model", "oracle", "--out",
                     str(tmp_path / "oracle"), "--families", "vfaith", "--no-progress"]) == 0
    assert main(["report", str(tmp_path / "oracle"), str(tmp_path / "prior"), "--out", str(tmp_path / "cmp")]) == 0
    comparison = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert comparison["models"] == ["oracle", "prior"]
    assert comparison["families"]["vfaith"]["pairs"] == 1
    assert comparison["families"]["mcot"]["na_reason"] == {"oracle": "not in this profile"}
    assert comparison["families"]["mcot"]["pairs_reason"] == "fewer than two profiles scored this family"
    assert comparison["overall"]["oracle"]["mcot"] is None


def test_a_killed_evaluate_resumes_to_the_same_profile(cached: Path, tmp_path: Path) -> None:
    model = suite_reference_model(load_suite(None), "oracle")
    with ReferenceServer(None, model, latency_s=0.05) as server:
        command = [MMFAITH, "evaluate", "--base-url", server.base_url, "--model", "oracle", "--families",
                   "spd-faith,vfaith", "--concurrency", "2", "--no-progress"]
        assert main(command[1:] + ["--out", str(tmp_path / "whole")]) == 0
        killed = subprocess.Popen([*command, "--out", str(tmp_path / "resumed")], start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        left = kill_after_lines(killed, tmp_path / "resumed" / "runs" / "vfaith" / "predictions.jsonl", 3)
        assert 3 <= left < 28 and not (tmp_path / "resumed" / "profile.json").exists()
        assert main(command[1:] + ["--out", str(tmp_path / "resumed")]) == 0
    assert (tmp_path / "resumed" / "profile.json").read_bytes() == (tmp_path / "whole" / "profile.json").read_bytes()
    assert (tmp_path / "resumed" / "profile.md").read_bytes() == (tmp_path / "whole" / "profile.md").read_bytes()


def test_a_family_that_fails_is_recorded_and_the_others_go_on(cached: Path, tmp_path: Path) -> None:
    # Only VFaith has a memorizer: the suite's memorizer refuses SPD-Faith's requests (400, not retried).
    with ReferenceServer(None, suite_reference_model(load_suite(None), "memorizer")) as server:
        assert [name for name, _ in server.model.models] == ["vfaith"]
        status = main(["evaluate", "--base-url", server.base_url, "--model", "memorizer", "--out", str(tmp_path),
                       "--families", "spd-faith,vfaith", "--max-attempts", "1", "--no-progress"])
    assert status == 1
    profile = _profile(tmp_path)
    assert profile["families"]["spd-faith"]["status"] == "failed"
    assert "requests failed" in profile["families"]["spd-faith"]["error"]
    assert profile["families"]["vfaith"]["status"] == "ok"
    assert _values(profile["families"]["vfaith"])["edit_accuracy"] == 0.0  # the memorizer repeats the original
    assert "failed: " in (tmp_path / "profile.md").read_text()


@pytest.mark.parametrize("family", ["crm", "mcot"])
def test_quickstart_family_runs_every_reference_model(family: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    assert main(["quickstart", "--family", family, "--out", str(tmp_path), "--no-progress"]) == 0
    assert "report: " in capsys.readouterr().out
    models = [name for name, _ in families.get(family).reference_models]
    assert sorted(p.name for p in (tmp_path / "scores").iterdir()) == sorted(models)
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    n = len(models)
    assert len(comparison["pairs"]) == n * (n - 1) // 2  # every pair compared


def test_suite_files_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "suite.json"
    bad.write_text(json.dumps({"format": "mmfaith-suite/1", "name": "x", "version": "1",
                               "families": {"vfaith": {"run": []}}}))
    assert main(["evaluate", "--suite", str(bad), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"mmfaith: error: {bad}: not a mmfaith-suite/1 suite file: vfaith: an entry has")
    assert error.count("\n") == 1
    bad.write_text(json.dumps({"format": "mmfaith-suite/1", "name": "x", "version": "1",
                               "families": {"nope": {"build": []}}}))
    assert main(["serve-reference", "--suite", str(bad), "--model", "oracle", "--port", "0"]) == 2
    assert "unknown family 'nope'" in capsys.readouterr().err
    bad.write_text(json.dumps({"format": "mmfaith-suite/1", "name": "x", "version": "1",
                               "families": {"mcot": {"build": [], "no_image": "yes"}}}))
    assert main(["serve-reference", "--suite", str(bad), "--model", "oracle", "--port", "0"]) == 2
    assert capsys.readouterr().err == f'mmfaith: error: {bad}: not a mmfaith-suite/1 suite file: mcot: "no_image" ' \
        'must be true or false.\n'


def test_suite_build_writes_a_suite_file_evaluate_reads(tmp_path: Path, sample: tuple[Path, Path]) -> None:
    recipe = tmp_path / "mcot-only.json"
    recipe.write_text(json.dumps({"format": "mmfaith-suite/1", "name": "mcot-only", "version": "2",
                                  "families": {"mcot": {"build": ["--limit", "4"], "run": [], "no_image": True}}}))
    annotations, images = sample
    assert main(["suite", "build", "--suite", str(recipe), "--coco-annotations", str(annotations), "--images",
                 str(images), "--out", str(tmp_path / "built"), "--no-progress"]) == 0
    built = load_suite(tmp_path / "built")
    assert (built.name, built.version, built.families()) == ("mcot-only", "2", ["mcot"])
    assert built.entry("mcot").dataset == str(tmp_path / "built" / "mcot") and built.entry("mcot").no_image
    # The suite's recipe reached the build (limit 4); how many items the sample yields under the builder's gates
    # is the build's own count (3 this round, 4 before), not this test's concern.
    build = json.loads((tmp_path / "built" / "mcot" / "build.json").read_text())
    assert build["recipe"]["limit"] == 4 and build["status"] == "complete"
    assert len((tmp_path / "built" / "mcot" / "records.jsonl").read_text().splitlines()) == build["counts"]["items"]
