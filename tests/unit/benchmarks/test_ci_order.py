"""The replay of xdist's loadfile scheduler behind CI's module order
(``benchmarks/ci_order.py``)."""

from __future__ import annotations

from benchmarks import ci_order


def test_a_worker_takes_its_next_module_while_two_tests_are_still_pending():
    # a: one 100 s test, b and c: one 10 s test each, d: one 50 s test. Two workers: the
    # first holds a and, with one test pending, c too; the second b, then d: 110 s, not 60
    tests = {"a": [100.0], "b": [10.0], "c": [10.0], "d": [50.0]}
    assert ci_order.finish(tests, ["a", "b", "c", "d"], workers=2) == 110.0
    # a module of four tests takes nothing more until two of them are left
    tests = {"a": [10.0] * 4, "b": [5.0], "c": [100.0]}
    assert ci_order.finish(tests, ["a", "b", "c"], workers=2) == 105.0


def test_durations_sum_setup_call_and_teardown_and_default_the_unlisted():
    log = ("12.50s setup    tests/integration/test_x.py::test_one\n"
           "30.00s call     tests/integration/test_x.py::test_one\n"
           "7.00s call     tests/integration/test_y.py::test_two[a-1]\n"
           "9.00s call     tests/unit/test_z.py::test_three\n")
    modules = {"test_x": ["test_one", "test_other"], "test_y": ["test_two[a-1]"]}
    assert ci_order.durations(log, modules, default=1.0) == {"test_x": [42.5, 1.0],
                                                             "test_y": [7.0]}


def test_xdist_reorder_puts_the_modules_with_most_tests_first():
    tests = {"a": [1.0], "b": [1.0, 1.0, 1.0], "c": [1.0, 1.0]}
    assert ci_order.by_count(["a", "b", "c"], tests) == ["b", "c", "a"]
