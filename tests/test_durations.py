"""The lag of the per-batch log line in units a person reads at a glance."""
import pytest

from streaming.pipeline.batch import readable_duration


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.25, "250 ms"),
        (12.34, "12.3 s"),
        (59.94, "59.9 s"),
        (60, "1 min 0 s"),
        (125, "2 min 5 s"),
        (3 * 3600 + 4 * 60 + 59, "3 h 4 min"),
        (86400, "1 d 0 h"),
        # A year of old sample data: the log used to say "31600000.0s".
        (365 * 86400 + 14 * 3600 + 59 * 60, "365 d 14 h"),
        (-125, "-2 min 5 s"),
    ],
)
def test_lag_is_printed_in_the_two_largest_units(seconds, expected):
    assert readable_duration(seconds) == expected
