"""The quiet test bed's arms and block order (``benchmarks/quiet_test_bed.py``): every arm
gets the same number of blocks, mirrored so slow drift over a server's life falls on each."""

from __future__ import annotations

from unittest import mock

from benchmarks import quiet_test_bed as bed
from model_optimizer.engine.placement import Placement


def test_blocks_are_mirrored_round_by_round():
    assert bed.block_order(["unplaced", "auto"], 3) == [
        "unplaced", "auto", "auto", "unplaced", "unplaced", "auto"]
    order = bed.block_order(list(bed.ARMS), 2)
    assert order == ["unplaced", "auto", "float", "old-auto",
                     "old-auto", "float", "auto", "unplaced"]
    assert all(order.count(arm) == 2 for arm in bed.ARMS)


class Proc:
    def __init__(self, pid: int, title: str):
        self.pid, self.title = pid, title

    def cmdline(self) -> list[str]:
        return [self.title]


def test_each_arm_places_what_it_names():
    placed = Placement("auto", (0,), (1,), (1,), pin_engine=True, keep_workers=True)
    tree = [Proc(43, "VLLM::EngineCore"), Proc(44, "VLLM::Worker")]
    pinned = {}
    for arm in bed.ARMS:
        with mock.patch.object(bed, "unplace") as unplace, \
                mock.patch.object(bed.psutil, "Process") as process, \
                mock.patch.object(bed, "pin_threads") as pin, \
                mock.patch("model_optimizer.engine.placement.pin_threads") as pin_auto, \
                mock.patch("model_optimizer.engine.placement.affinities"):
            process.return_value.children.return_value = tree
            bed.place_arm(arm, 42, placed)
        unplace.assert_called_once_with(42)               # every arm starts from nothing
        pinned[arm] = sorted((c.args[0], tuple(c.args[1])) for c in
                             [*pin.call_args_list, *pin_auto.call_args_list])
    assert pinned == {"unplaced": [],                          # never the worker (44)
                      "auto": [(42, (1,)), (43, (0,))],        # the engine core beside it
                      "float": [(42, (1,))],                   # the engine core floats
                      "old-auto": [(42, (1,)), (43, (1,))]}    # beside the API server
