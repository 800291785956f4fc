"""The README's test command runs both tiers at once: its exit code is a failing tier's."""

from tests.run_tiers import NO_TESTS, TIERS, combined_exit


def test_a_failing_tier_fails_the_run_the_unit_tier_first():
    assert combined_exit([0, 0]) == 0
    assert combined_exit([1, 0]) == 1 and combined_exit([0, 1]) == 1
    assert combined_exit([2, 1]) == 2                    # the unit tier's code comes first


def test_a_tier_left_without_tests_passes_only_beside_one_that_ran():
    assert combined_exit([NO_TESTS, 0]) == 0             # `-k` matched unit tests only
    assert combined_exit([0, NO_TESTS]) == 0
    assert combined_exit([NO_TESTS, 1]) == 1
    assert combined_exit([NO_TESTS, NO_TESTS]) == NO_TESTS   # nothing ran at all


def test_the_tiers_split_the_suite_by_the_integration_mark():
    marks = [args[args.index("-m") + 1] for _, args, _ in TIERS]
    assert marks == ["not integration", "integration"]
    unit, integration = (niceness for _, _, niceness in TIERS)
    assert unit > integration                            # the unit tier yields to launches
