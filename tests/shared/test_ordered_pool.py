"""Per-item work on forked processes, results in order (mmfaith/ordered_pool.py, issue 34)."""
from __future__ import annotations

import os

import pytest

from mmfaith.errors import MmfaithError
from mmfaith.ordered_pool import ordered_map


def test_results_come_in_the_order_of_the_inputs_from_other_processes_reading_the_callers_data() -> None:
    held = {k: k * k for k in range(40)}  # a closure's data: inherited by the forked workers, never pickled
    here = os.getpid()

    def work(k: int) -> tuple[int, int]:
        return held[k], os.getpid()

    results = list(ordered_map(work, range(40), workers=3))
    assert [value for value, _ in results] == [k * k for k in range(40)]
    assert {pid for _, pid in results} - {here}, "no input ran on a worker process"
    assert here not in {pid for _, pid in results}
    inline = list(ordered_map(work, range(5), workers=1))  # one worker: here, the same results
    assert inline == [(k * k, here) for k in range(5)]
    assert list(ordered_map(work, [7], workers=4)) == [(49, here)]  # one input: no process is started


def test_an_error_in_a_worker_is_raised_in_the_caller() -> None:
    def work(k: int) -> int:
        if k == 5:
            raise MmfaithError(f"item {k}: bad")
        return k

    with pytest.raises(MmfaithError, match="item 5: bad"):
        list(ordered_map(work, range(12), workers=2))


def test_a_worker_that_dies_is_an_error_not_a_wait_forever() -> None:
    here = os.getpid()

    def work(k: int) -> int:
        if k == 3 and os.getpid() != here:
            os._exit(9)  # as a worker killed by the kernel's out-of-memory killer ends: no exception, no result
        return k

    with pytest.raises(MmfaithError, match="worker process died"):
        list(ordered_map(work, range(8), workers=2))
