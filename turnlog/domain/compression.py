"""Pre-turn hygiene: when a session's history is too large to hand to the model as is."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

HYGIENE_THRESHOLD_RATIO = 0.85
HARD_MESSAGE_LIMIT = 5000
MIN_MESSAGES = 4
TOKENS_PER_IMAGE = 1500


def estimate_tokens(texts: Iterable[str | None], images: int = 0) -> int:
    """A rough token count: a quarter of the characters, rounded up, plus a flat cost per image."""
    _require_int("images", images, minimum=0)
    chars = 0
    for text in texts:
        if text is None:
            continue
        if not isinstance(text, str):
            raise ValueError(f"texts must hold strings, got {text!r}")
        chars += len(text)
    return (chars + 3) // 4 + images * TOKENS_PER_IMAGE


def should_compress(
    *,
    message_count: int,
    prompt_tokens: int,
    context_length: int,
    hard_message_limit: int = HARD_MESSAGE_LIMIT,
    threshold_ratio: float = HYGIENE_THRESHOLD_RATIO,
    min_messages: int = MIN_MESSAGES,
) -> bool:
    """Whether to compress before the turn: near the context limit, or simply too many messages.

    The message-count limit fires even without token data, so a session whose size
    cannot be measured still cannot grow without bound.
    """
    _require_int("message_count", message_count, minimum=0)
    _require_int("prompt_tokens", prompt_tokens, minimum=0)
    _require_int("context_length", context_length, minimum=1)
    _require_int("hard_message_limit", hard_message_limit, minimum=1)
    _require_int("min_messages", min_messages, minimum=0)
    if (
        not isinstance(threshold_ratio, (int, float))
        or isinstance(threshold_ratio, bool)
        or not 0 < threshold_ratio <= 1
    ):
        raise ValueError(f"threshold_ratio must be in (0, 1], got {threshold_ratio!r}")

    if message_count < min_messages:
        return False
    # Exact decimal arithmetic: 0.07 * 100 must be 7, not 7.000000000000001.
    token_threshold = Fraction(str(threshold_ratio)) * context_length
    return prompt_tokens >= token_threshold or message_count >= hard_message_limit


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
