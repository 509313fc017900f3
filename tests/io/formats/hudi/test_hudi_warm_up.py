"""HudiSink.warm_up: the first Hudi write's one-off cost (Hudi's write path loaded and
compiled by the JVM) paid on scratch tables before a stream takes its first file,
leaving the raw folder as every reader and the sink itself knew it."""
from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from streaming.contracts.loader import load_contracts
from streaming.io.formats.hudi.format import HUDI
from streaming.io.formats.hudi.sink import WARM_UP_FOLDER, WARM_UP_TABLE, HudiSink, save_with_hudi
from streaming.io.formats.hudi.timeline import LocalFiles, completed_instants
from streaming.io.formats.raw_format import RawTableCounts, WarmingSink
from streaming.io.formats.registry import format_on_disk
from streaming.io.layout import TEMPORARY_FOLDER


class Killed(Exception):
    """Where the writer stands in for SIGKILL."""


class CommittingWriter:
    """The real Hudi write, recording each table written, its operation and how many
    completed commits the table has right after it. With `killed_after`, the writes stop
    after that many commits, the scratch folder copied to `left_in` first: what SIGKILL
    at that moment leaves behind, since no clean-up runs then."""

    def __init__(self, killed_after: int | None = None, left_in: Path | None = None) -> None:
        self.commits: list[tuple[str, str, int]] = []
        self.killed_after = killed_after
        self.left_in = left_in

    def __call__(self, frame, options, path: str) -> None:
        save_with_hudi(frame, options, path)
        self.commits.append((Path(path).name, options["hoodie.datasource.write.operation"],
                             len(completed_instants(LocalFiles(), path))))
        if len(self.commits) == self.killed_after:
            shutil.copytree(Path(path).parent, self.left_in)
            raise Killed


def scratch_of(raw: Path) -> Path:
    return raw / TEMPORARY_FOLDER / WARM_UP_FOLDER


def test_warm_up_commits_to_scratch_tables_and_leaves_no_table_behind(hudi_spark, tmp_path):
    raw = tmp_path / "raw"
    contracts = load_contracts()
    writer = CommittingWriter()
    sink = HudiSink(str(raw), "raw", contracts, sync_mode="none", stream_id="stream-a", writer=writer)
    assert isinstance(sink, WarmingSink)

    sink.warm_up(hudi_spark)

    # A change log's insert, the current state's upsert creating it, then one merging into
    # its file group: each a completed Hudi commit, the paths a batch's commits take.
    changes = f"{WARM_UP_TABLE}_changes"
    assert writer.commits == [(changes, "insert", 1), (WARM_UP_TABLE, "upsert", 1), (WARM_UP_TABLE, "upsert", 2)]
    assert not scratch_of(raw).exists()
    # No raw table was created: the folder is still read as one without tables.
    assert format_on_disk(raw) is None and HUDI.tables_in(raw) == {}
    for contract in contracts.values():
        assert HUDI.count(duckdb.connect(), raw, contract) == RawTableCounts(0, 0, 0, 0, {})


def test_a_start_killed_in_its_warm_up_leaves_only_scratch_which_the_next_start_removes_first(hudi_spark, tmp_path):
    raw = tmp_path / "raw"
    contracts = load_contracts()
    left = tmp_path / "left by the kill"
    killed = HudiSink(str(raw), "raw", contracts, sync_mode="none", stream_id="stream-a",
                      writer=CommittingWriter(killed_after=2, left_in=left))
    with pytest.raises(Killed):
        killed.warm_up(hudi_spark)
    shutil.copytree(left, scratch_of(raw))
    assert sorted(path.name for path in scratch_of(raw).iterdir()) == [WARM_UP_TABLE, f"{WARM_UP_TABLE}_changes"]
    assert format_on_disk(raw) is None

    writer = CommittingWriter()
    HudiSink(str(raw), "raw", contracts, sync_mode="none", stream_id="stream-a", writer=writer).warm_up(hudi_spark)

    # Each scratch table made anew (its first commit is the one count), none appended to.
    changes = f"{WARM_UP_TABLE}_changes"
    assert writer.commits == [(changes, "insert", 1), (WARM_UP_TABLE, "upsert", 1), (WARM_UP_TABLE, "upsert", 2)]
    assert not scratch_of(raw).exists()
    assert format_on_disk(raw) is None


def test_the_glue_jobs_sink_warms_up_beside_its_s3_tables_and_syncs_no_scratch_table(spark, monkeypatch):
    """On Glue the scratch tables sit under the job's S3 raw root, as its tables do, and
    with the job's catalog sync on none of them reaches the catalog."""
    import streaming.io.formats.hudi.sink as hudi_sink
    from streaming.io.formats.hudi.options import meta_sync_tools
    from streaming.io.formats.raw_format import JobSinkSettings

    deleted: list[str] = []

    class S3Files:
        def __init__(self, spark) -> None:
            pass

        def delete(self, path: str) -> None:
            deleted.append(path)

    monkeypatch.setattr(hudi_sink, "HadoopFiles", S3Files)
    sink = HUDI.job_sink(spark, JobSinkSettings("s3://lake/raw", "raw", "glue", 24, 100), load_contracts(), "stream-7")
    writes: list[tuple[str, dict]] = []
    sink._writer = lambda frame, options, path: writes.append((path, options))

    sink.warm_up(spark)

    scratch = f"s3://lake/raw/{TEMPORARY_FOLDER}/{WARM_UP_FOLDER}"
    assert [path for path, _ in writes] == [f"{scratch}/{WARM_UP_TABLE}_changes", *[f"{scratch}/{WARM_UP_TABLE}"] * 2]
    assert all(meta_sync_tools(options) == [] for _, options in writes)
    assert deleted == [scratch, scratch]
