"""promtool's expanding notation: the fast encoder writes what the plain greedy loop writes."""

from __future__ import annotations

import random

from trainsignals.generator.testkit.series_notation import (
    STALE,
    Prefixes,
    encode,
    encode_shared,
    shared_encodings,
)


def _number(value: float) -> str:
    return repr(float(value)).removesuffix(".0")


def _reference(values: list) -> str:
    """The encoder as first written: one greedy pass, sample by sample."""
    parts: list[str] = []
    i = 0
    while i < len(values):
        if values[i] == STALE:
            parts.append(STALE)
            i += 1
            continue
        if values[i] is None:
            j = i
            while j + 1 < len(values) and values[j + 1] is None:
                j += 1
            parts.append("_" if j == i else f"_x{j - i + 1}")
            i = j + 1
            continue
        start, step, tolerance, j = values[i], None, 0.0, i
        while j + 1 < len(values):
            following = values[j + 1]
            if following is None or following == STALE:
                break
            delta = following - values[j]
            if step is None:
                step = delta
                tolerance = 1e-9 * (abs(step) if abs(step) > 1 else 1.0)
            elif delta - step > tolerance or step - delta > tolerance:
                break
            j += 1
        count = j - i
        if count == 0:
            parts.append(_number(start))
        elif step == 0:
            parts.append(f"{_number(start)}x{count}")
        else:
            sign = "+" if step >= 0 else "-"
            parts.append(f"{_number(start)}{sign}{_number(abs(step))}x{count}")
        i = j + 1
    return " ".join(parts)


SAMPLES = [0, 1, 0.0, -0.0, 1.0, 2, 0.5, 1e12, 1e12 + 0.25, float("nan"), float("inf")]
SAMPLES += [-float("inf"), None, STALE, 1e-10, 3e-10, 1 + 1e-9, 60.0, True]


def _series(rnd: random.Random) -> list:
    values: list = []
    value, step = rnd.choice([0, 0.0, 5.5, 1e9]), rnd.choice([0, 1, 0.5, 1 / 64, -1, 1e-10])
    for _ in range(rnd.randint(0, 40)):
        roll = rnd.random()
        if roll < 0.6:  # arithmetic runs, as counters and gauges make
            value = value + step
            values.append(value)
        elif roll < 0.7:
            step = rnd.choice([0, 1, 0.5, 1 / 64, 60.0, -1, 1e-10, 1e-9, 2e-9])
            values.append(value)
        else:
            sample = rnd.choice(SAMPLES)
            values.append(sample)
            value = sample if isinstance(sample, (int, float)) else 0.0
    return values


def test_encode_matches_the_greedy_loop() -> None:
    rnd = random.Random(18)
    for _ in range(20_000):
        values = _series(rnd)
        assert encode(values) == _reference(values), values


def test_shared_encodings_tell_equal_looking_series_apart() -> None:
    # 0.0 and -0.0 (and 1 and 1.0) are equal in a tuple; the memo must still write "-0".
    rnd = random.Random(19)
    pool = [_series(rnd) for _ in range(500)]
    with shared_encodings():
        for _ in range(5_000):
            values = rnd.choice(pool)
            if rnd.random() < 0.3:
                values = [-0.0 if v == 0 and type(v) is float else v for v in values]
            assert encode_shared(values) == _reference(values), values
        assert encode_shared([-0.0, 1.0]) == "-0+1x1"
        assert encode_shared([0.0, 1.0]) == "0+1x1"
        # With gaps (their keys are marshal's bytes): the same, and gap kinds told apart.
        assert encode_shared([None, -0.0, 1.0]) == "_ -0+1x1"
        assert encode_shared([None, 0.0, 1.0]) == "_ 0+1x1"
        assert encode_shared([STALE, 0.0, 1.0]) == "stale 0+1x1"
        assert encode_shared([None, 1, 2]) == encode_shared([None, 1.0, 2.0]) == "_ 1+1x1"


def test_prefixes_encode_every_prefix_as_the_greedy_loop_does() -> None:
    rnd = random.Random(20)
    for _ in range(3_000):
        values = _series(rnd)
        if not values:
            continue
        prefixes = Prefixes(values)
        assert prefixes.length == len(values)
        for length in rnd.sample(range(1, len(values) + 1), min(len(values), 8)):
            assert prefixes.text(length) == _reference(values[:length]), (values, length)
        assert prefixes.text(len(values)) == _reference(values), values
