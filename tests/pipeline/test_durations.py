"""The per-batch log line: its lag in units a person reads at a glance, and only the
tables that got rows."""
import pytest

from streaming.pipeline.batch import BatchReport, readable_duration


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


def test_the_batch_line_names_only_the_tables_that_got_rows():
    report = BatchReport(batch_id=4, records_in=9, landed={"customers": 7, "orders": 0, "app_users": 2},
                         quarantined=0, duplicates_dropped=0, unrouted=0, moved=0, max_event_ts=None,
                         lag_seconds=None, seconds=1.25)
    assert report.log_line() == ("batch=4 in=9 landed customers=7 app_users=2 quarantined=0 unrouted=0 "
                                 "duplicates_dropped=0 lag=n/a took=1.2s")
    empty = BatchReport(**{**report.__dict__, "landed": {"customers": 0, "orders": 0}})
    assert " landed nothing quarantined=0 " in empty.log_line()
