"""mmfaith/step_pool.py: steps run on real worker processes once the steps they wait for have ended, their results
handed on, their printed lines shown whole, a failing step's error raised in the caller."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mmfaith.errors import MmfaithError
from mmfaith.step_pool import Step, available_cores, run_steps


def _stamp(folder: str, name: str, pause_s: float) -> int:
    """Print two lines with a pause between them (another step's lines would land between them if output were not
    held), write FOLDER/NAME, and return this worker's pid."""
    print(f"{name} starts")
    time.sleep(pause_s)
    print(f"{name} ends")
    (Path(folder) / name).write_text("done")
    return os.getpid()


def _after_stamp(folder: str, name: str, done: dict[str, int]) -> list[str]:
    """What the steps this one waited for left behind when it started: it must find every one of their files."""
    return sorted(path.name for path in Path(folder).iterdir()) + [f"{name} saw {len(done)}"]


def _fails(message: str) -> None:
    print("about to fail")
    raise MmfaithError(message)


def test_steps_wait_for_their_steps_and_get_their_results(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = str(tmp_path)
    steps = [Step("a", _stamp, (folder, "a", 0.3)), Step("b", _stamp, (folder, "b", 0.3)),
             Step("c", _after_stamp, (folder, "c"), after=("a", "b"), with_results=True)]
    results = run_steps(steps, workers=2, progress=True)
    assert results["c"] == ["a", "b", "c saw 2"]  # c started after a and b had written their files
    assert os.getpid() not in (results["a"], results["b"])  # they ran in worker processes
    shown = capsys.readouterr().out
    # Each step's two lines stay together although a and b ran side by side, pausing between their lines.
    assert "a starts\na ends\n" in shown and "b starts\nb ends\n" in shown
    assert "c: done in " in shown and "CPU-s)" in shown


def test_a_failing_step_raises_its_error_here_and_no_later_step_runs(tmp_path: Path,
                                                                     capfd: pytest.CaptureFixture) -> None:
    steps = [Step("boom", _fails, ("the build failed",)),
             Step("later", _stamp, (str(tmp_path), "later", 0.0), after=("boom",))]
    with pytest.raises(MmfaithError, match="the build failed"):
        run_steps(steps, workers=2, progress=False)
    assert not (tmp_path / "later").exists()
    assert "about to fail" in capfd.readouterr().err  # what the failed step printed is not lost


def test_a_step_waiting_on_no_step_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not steps"):
        run_steps([Step("a", _stamp, (str(tmp_path), "a", 0.0), after=("missing",))], workers=1)
    assert not (tmp_path / "a").exists()


def test_available_cores_follows_the_affinity_mask() -> None:
    assert available_cores() == len(os.sched_getaffinity(0))
