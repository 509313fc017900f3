"""What a raw format is to the rest of the project: `RawFormat`, the one protocol each
format's folder implements (hudi/format.py, parquet/format.py), and what its readers
return. Callers take a format from the registry (registry.py), never by its name.

A format answers, in the order a data directory meets them:

1. `capabilities`: what its sink lets the pipeline and the one-off batches do, as data.
2. `jars`, `spark_settings`, `jvm_log_levels`, `expected_jvm_warnings`: what a local Spark
   session starts with for it, and the JVM log lines it keeps quiet.
3. `sink`: the raw sink of a local run over a data directory; `job_sink`, the AWS job's
   (streaming/runtime/glue_job.py); `require_jars`, made before either (the local sink
   makes it itself), whose message says how that runner adds the format's jars.
4. `is_table`: whether a folder of a local raw folder is one of its tables; the registry
   finds a data directory's format from these.
5. The readers, all without Spark: `register` (a table's rows as a DuckDB relation),
   `current_state` (the relation reconcile compares), `count` (`lakehouse status`),
   `batch_ids` (the stream batches a change log holds), `dbt_inputs` (what dbt reads).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from streaming.errors import OperatorError
from streaming.pipeline.sink_capabilities import SinkCapabilities

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import RawSink


@dataclass(frozen=True)
class MavenJar:
    """A JVM library pinned by its Maven coordinate and SHA-256: what a format puts on a
    local session's classpath (streaming/runtime/jars.py fetches and checks it)."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


@dataclass(frozen=True)
class JobSinkSettings:
    """What the AWS job (streaming/runtime/glue_job.py) asks of its raw sink beyond what a
    local run does: its job parameters, validated there."""

    raw_root: str
    """s3://bucket/prefix; a table is <raw_root>/<table>."""
    database: str
    """The catalog database the tables are synced to."""
    sync_mode: str
    """How each commit reaches the catalog, one of the format's modes."""
    retain_hours: int
    """Hours replaced file versions are kept for queries still reading them."""
    commit_interval_seconds: int
    """The micro-batch interval: at most one commit per table per interval."""


class MissingFormatJars(OperatorError, RuntimeError):
    """The session's JVM cannot load a format's jars; the message names them and how the
    runner adds them."""


class UnreadableRawTable(OperatorError):
    """A raw table its format's reader refused; the message names the table, the reason
    and what to do, on one line."""


class RawReadRefused(OperatorError):
    """What dbt was asked to read cannot be read from these raw tables."""


@runtime_checkable
class WarmingSink(Protocol):
    """A raw sink whose first write in a process pays a one-off cost (its format's JVM
    write path loaded and compiled) that it can pay without writing a raw table:
    start-up (streaming/runtime/startup.py) has a stream that waits for files warm it up
    before the query starts, so that the first file does not wait on that cost."""

    def warm_up(self, spark: SparkSession) -> None:
        """Run the write path once on scratch tables that are removed again; no raw
        table is created or changed."""


class RawCommit(Protocol):
    """One completed commit of a format that keeps commits, as `lakehouse status` lists it."""

    @property
    def instant(self) -> str: ...

    @property
    def action(self) -> str: ...

    @property
    def operation(self) -> str | None: ...

    @property
    def inserted(self) -> int: ...

    @property
    def updated(self) -> int: ...

    @property
    def batch_marker(self) -> str | None: ...


@dataclass(frozen=True)
class RawTableCounts:
    """One raw table's rows as `lakehouse status` reports them."""

    change_rows: int
    current_rows: int
    """Rows of its current state: one per key, tombstones included."""
    batches: int
    """The stream's batches its change log holds."""
    live_items: int
    """Keys whose current row is no tombstone (counted for an unrouted table only)."""
    commits: dict[str, tuple[RawCommit, ...]] = field(default_factory=dict)
    """Per table of the format (change log, current state) its completed commits, oldest
    first; none for a format without commits."""


@dataclass(frozen=True)
class DbtInputs:
    """What dbt reads a data directory's raw tables with."""

    dbt_vars: dict[str, str] = field(default_factory=dict)
    """dbt variables to run with (the raw-sources macro reads `raw_format`)."""
    left_out: tuple[str, ...] = ()
    """Raw tables that cannot be read; their models fail by name."""


Report = Callable[[str], None]


class RawFormat(Protocol):
    """One raw format; the steps are in the module's docstring."""

    @property
    def name(self) -> str:
        """The format's name: `--sink`'s choice, and the value of dbt's `raw_format`."""

    @property
    def title(self) -> str:
        """The format's name in a sentence."""

    @property
    def capabilities(self) -> SinkCapabilities: ...

    @property
    def jars(self) -> tuple[MavenJar, ...]:
        """The JVM libraries a local session loads for it (fetched by `make venv`)."""

    def spark_settings(self) -> dict[str, str]:
        """Spark settings a session starts with once the format's jars are loaded."""

    @property
    def jvm_log_levels(self) -> dict[str, str]:
        """Log levels of the format's JVM loggers that repeat a failed task's error, which
        the command prints once, or that warn, stack and all, of what the format then
        recovers from itself (spark_session.JVM_LOG_LEVELS)."""

    @property
    def expected_jvm_warnings(self) -> tuple[str, ...]:
        """Regular expressions of JVM log messages that are expected and dropped."""

    def sink(
        self, spark: SparkSession, *, data_dir: str, contracts: Mapping[str, TableContract], database: str,
        stream_id: str | None, metastore_uri: str | None,
    ) -> RawSink:
        """The raw sink of a local run writing under `<data_dir>/raw/` (streaming.io.sinks.choose_sink)."""

    def job_sink(
        self, spark: SparkSession, settings: JobSinkSettings, contracts: Mapping[str, TableContract], stream_id: str,
    ) -> RawSink:
        """The raw sink of the AWS job (streaming/runtime/glue_job.py), writing under
        `settings.raw_root`; its commits are marked with `stream_id`."""

    def require_jars(self, spark: SparkSession, *, glue_job: bool = False) -> None:
        """MissingFormatJars when the session's JVM cannot load the format's jars, saying how
        to add them: locally `make venv` (or --packages on a cluster), in the AWS job
        (`glue_job`) its Glue job parameter."""

    def is_table(self, folder: Path) -> bool:
        """Whether a local folder is one of this format's raw tables."""

    def register(self, connection: object, name: str, table_dir: Path) -> bool:
        """Make `name` a DuckDB relation over a local table's rows; False, registering
        nothing, while it has no rows yet."""

    def current_state(self, connection: object, table_dir: Path, alias: str) -> str | None:
        """A DuckDB relation (SQL) over a local table's rows, registered under a name
        starting with `alias` where one is needed; None while it has no rows yet."""

    def count(self, connection: object, raw_dir: Path, contract: TableContract) -> RawTableCounts:
        """A contract's raw tables counted; UnreadableRawTable when one cannot be read."""

    def batch_ids(self, table_dir: Path) -> set[int]:
        """The batch ids a local change log holds."""

    def dbt_inputs(
        self, data_dir: Path, raw_dir: Path, raw_as_of: str | None, prepare: Callable[[], None], report: Report,
    ) -> DbtInputs:
        """Get the raw tables under `raw_dir` ready for dbt (as of `raw_as_of`, a commit,
        when given; RawReadRefused where that cannot be), calling `prepare` before anything
        is written for dbt."""
