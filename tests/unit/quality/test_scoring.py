"""Task scorers and accuracy comparisons."""

from model_optimizer.quality.evalset import EvalItem
from model_optimizer.quality.scoring import compare_accuracy, first_number, score


def item(scorer, reference=None, pattern=None):
    return EvalItem("i", prompt="p", reference=reference, scorer=scorer, pattern=pattern)


def test_exact_uses_the_first_line_without_a_trailing_period():
    assert score(item("exact", "seven"), " seven .\ncount from two") is True
    assert score(item("exact", "seven"), "\n  seven  ") is True
    assert score(item("exact", "seven"), " seventeen .") is False
    assert score(item("exact", "Seven"), "seven") is False


def test_contains_number_and_regex():
    assert score(item("contains", "blue cat"), "red blue cat .") is True
    assert score(item("contains", "dog"), "red blue cat .") is False
    assert score(item("number", "7"), " seven .") is True
    assert score(item("number", "seven"), "it is 7.0") is True
    assert score(item("number", "3"), " thirteen .") is False
    assert score(item("number", "3"), "no digits") is False
    assert score(item("regex", pattern=r"\bcat\b"), "a cat") is True
    assert score(item("regex", "42", r"answer: (\d+)"), "answer: 42") is True
    assert score(item("regex", "42", r"answer: (\d+)"), "answer: 41") is False
    assert score(EvalItem("i", prompt="p"), "anything") is None


def test_first_number_reads_digits_and_words():
    assert first_number("it is twenty one") == 20.0
    assert first_number("-3 or 4") == -3.0
    assert first_number("none") is None


def test_a_drop_beyond_the_spread_of_repeats_is_beyond_noise():
    base = [[True] * 18 + [False] * 2] * 3           # 0.90 in every repeat
    cand = [[True] * 10 + [False] * 10] * 3          # 0.50 in every repeat
    result = compare_accuracy(base, cand)
    assert abs(result.drop - 0.40) < 1e-9 and result.noise == 0.0
    assert result.beyond_noise and result.p_value < 0.01


def test_a_drop_inside_the_spread_of_repeats_is_noise():
    base = [[True] * 18 + [False] * 2, [True] * 12 + [False] * 8]    # 0.90, 0.60
    cand = [[True] * 15 + [False] * 5, [True] * 14 + [False] * 6]    # 0.75, 0.70
    result = compare_accuracy(base, cand)
    assert abs(result.drop - 0.025) < 1e-9 and abs(result.noise - 0.30) < 1e-9
    assert not result.beyond_noise


def test_no_scored_items_gives_no_comparison():
    assert compare_accuracy([], [[True]]) is None
    assert compare_accuracy([[]], [[]]) is None
