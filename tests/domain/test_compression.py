import pytest

from turnlog.domain.compression import estimate_tokens, should_compress


def compress(**overrides):
    args = {"message_count": 10, "prompt_tokens": 0, "context_length": 100_000}
    args.update(overrides)
    return should_compress(**args)


# --- token threshold ---------------------------------------------------------------


def test_tokens_at_85_percent_compress():
    assert compress(prompt_tokens=85_000)


def test_tokens_just_under_85_percent_do_not_compress():
    assert not compress(prompt_tokens=84_999)


def test_threshold_on_a_context_that_does_not_divide_evenly():
    # 0.85 * 1001 = 850.85: 850 is under it, 851 is over.
    assert not compress(prompt_tokens=850, context_length=1001)
    assert compress(prompt_tokens=851, context_length=1001)


def test_custom_ratio_is_exact():
    # 0.07 * 100 is 7.000000000000001 in binary floating point.
    assert compress(prompt_tokens=7, context_length=100, threshold_ratio=0.07)
    assert not compress(prompt_tokens=6, context_length=100, threshold_ratio=0.07)


# --- message limits ----------------------------------------------------------------


def test_hard_message_limit_compresses_without_token_data():
    assert compress(message_count=5000, prompt_tokens=0)
    assert not compress(message_count=4999, prompt_tokens=0)


def test_custom_hard_message_limit():
    assert compress(message_count=400, hard_message_limit=400)
    assert not compress(message_count=399, hard_message_limit=400)


def test_fewer_than_four_messages_never_compress():
    assert not compress(message_count=3, prompt_tokens=1_000_000)
    assert compress(message_count=4, prompt_tokens=1_000_000)


def test_custom_minimum_messages_also_guards_the_hard_limit():
    assert not compress(message_count=3, hard_message_limit=2, min_messages=4)
    assert compress(message_count=3, hard_message_limit=2, min_messages=3)


# --- validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"message_count": -1}, "message_count"),
        ({"prompt_tokens": -1}, "prompt_tokens"),
        ({"prompt_tokens": 1.5}, "prompt_tokens"),
        ({"context_length": 0}, "context_length"),
        ({"context_length": True}, "context_length"),
        ({"hard_message_limit": 0}, "hard_message_limit"),
        ({"min_messages": -1}, "min_messages"),
        ({"threshold_ratio": 0}, "threshold_ratio"),
        ({"threshold_ratio": 1.5}, "threshold_ratio"),
        ({"threshold_ratio": float("nan")}, "threshold_ratio"),
    ],
)
def test_bad_arguments_are_rejected_by_name(overrides, named):
    with pytest.raises(ValueError, match=named):
        compress(**overrides)


def test_ratio_of_one_compresses_only_at_the_full_context():
    assert compress(prompt_tokens=100_000, threshold_ratio=1)
    assert not compress(prompt_tokens=99_999, threshold_ratio=1)


# --- token estimate ----------------------------------------------------------------


@pytest.mark.parametrize(
    "texts, expected",
    [
        ([], 0),
        ([""], 0),
        (["a"], 1),
        (["abcd"], 1),
        (["abcde"], 2),
        (["ab", "cd"], 1),  # rounded once over the total, not per text
        (["x" * 4000], 1000),
    ],
)
def test_estimate_is_a_quarter_of_the_characters_rounded_up(texts, expected):
    assert estimate_tokens(texts) == expected


def test_estimate_adds_1500_per_image():
    assert estimate_tokens([], images=2) == 3000
    assert estimate_tokens(["abcde"], images=1) == 1502


def test_estimate_skips_missing_text():
    assert estimate_tokens(["abcd", None]) == 1


def test_estimate_rejects_bad_input():
    with pytest.raises(ValueError, match="images"):
        estimate_tokens([], images=-1)
    with pytest.raises(ValueError, match="texts"):
        estimate_tokens([42])
