import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardbench.units import (
    MB,
    X_BYTES_PER_S,
    MiB,
    UnitError,
    fmt_rate,
    fmt_size,
    fmt_x,
    parse_duration,
    parse_rate,
    parse_size,
    x_rating,
)


@pytest.mark.parametrize("text,expected", [
    ("16MB", 16_000_000), ("16 MB", 16_000_000), ("64MiB", 64 * 2**20), ("1.5GB", 1_500_000_000),
    ("4096", 4096), ("42M", 42_000_000), ("1k", 1000), ("2KiB", 2048), ("0,5MB", 500_000),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "banana", "-1MB", "16 XB", "", "1e999MB", "1.5"])
def test_parse_size_rejects(text):
    with pytest.raises(UnitError):
        parse_size(text)


def test_rates_and_x():
    assert parse_rate("4.9MB/s") == pytest.approx(4.9e6)
    assert parse_rate("20 MiB/s") == 20 * MiB
    assert parse_rate("133x") == pytest.approx(133 * 150_000)
    assert X_BYTES_PER_S == 150_000
    # Kingston: 133X = 20 MB/s (19.95); the classic table: 3.8 MB/s is about 25X
    assert x_rating(19.95 * MB) == pytest.approx(133)
    assert fmt_x(3.8 * MB) == "25.3X"
    assert fmt_rate(4.897e6) == "4.897 MB/s"
    assert fmt_rate(MiB, "MiB/s") == "1.000 MiB/s"
    assert fmt_size(16_000_000) == "16.0 MB" and fmt_size(16 * MiB, binary=True) == "16.0 MiB"


@given(st.text(max_size=20))
def test_parse_size_never_crashes(text):
    try:
        v = parse_size(text)
    except UnitError:
        return
    assert isinstance(v, int) and v >= 1


@pytest.mark.parametrize("text,expected", [
    ("4.9MB/s", 4.9e6), ("20MiB/s", 20 * MiB), ("20 MiBps", 20 * MiB), ("133x", 133 * 150_000),
    ("133X", 133 * 150_000), ("1e6", None), ("1000000", 1e6), ("1,5MB/s", 1.5e6), (2.5e6, 2.5e6),
])
def test_parse_rate(text, expected):
    if expected is None:
        with pytest.raises(UnitError):
            parse_rate(text)
    else:
        assert parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["fast", "0MB/s", "-1MB/s", "", "5 furlongs/s", "1e999MB/s", True])
def test_parse_rate_rejects(text):
    with pytest.raises(UnitError):
        parse_rate(text)


def test_parse_duration_and_zero():
    assert parse_duration("250ms") == pytest.approx(0.25) and parse_duration("2m") == 120
    for zero in ("0", "0s", "0ms", "0.0"):
        with pytest.raises(UnitError):
            parse_duration(zero)
        assert parse_duration(zero, zero=True) == 0
    with pytest.raises(UnitError):
        parse_duration("-1s", zero=True)
