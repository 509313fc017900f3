"""Split landing objects into change records, as Kinesis Data Firehose writes them.

Firehose concatenates the records of one delivery into one S3 object with no delimiter
(a newline only when the stream has the `AppendDelimiterToRecord` processor), GZIP'd when
compression is on (https://docs.aws.amazon.com/firehose/latest/APIReference/API_Processor.html,
https://docs.aws.amazon.com/firehose/latest/dev/s3-object-name.html). A default object is
therefore one line `{...}{...}{...}` of up to 128 MiB, and a line-based reader is the wrong
model: this module reads an object as a byte stream and cuts it into JSON objects.

Every non-whitespace byte of an object ends up in exactly one record: a record is valid
(reason None) or carries the quarantine reason the splitter found:

- `invalid_json`       not a JSON object (junk up to the next newline or `{` that can start
                       a record, see `_JunkEnd`; a truncated or malformed object up to its
                       closing brace or the next newline),
                       or one Python cannot read: nested deeper than its recursion limit
                       (1,000; DynamoDB nests at most 32 levels) or an integer of more than
                       4,300 digits (`sys.get_int_max_str_digits`; DynamoDB numbers have 38)
- `trailing_garbage`   a JSON object followed by something other than whitespace or the
                       next object (`{...} xyz`, `{...},`); the record keeps both
- `duplicate_key`      an object holding one key twice at any depth (JSON parsers differ
                       on which one wins, so neither is trusted)
- `record_too_large`   more than `MAX_RECORD_BYTES`: skipped by a scan that keeps only a
                       `TOO_LARGE_PREFIX_BYTES` prefix, never the whole record
- `unreadable_file`    the object cannot be read on (a truncated GZIP stream; a corrupt one,
                       the record naming the compressed byte zlib rejected; an I/O error);
                       the records before that point are kept. Deflate carries no checksum
                       of its own: damage that still decodes is found only by the member's
                       CRC-32 at its end, so the records decoded in between land, some of
                       them altered; the `unreadable_file` record names the object to check
- `unsupported_compression`  a ZIP, Snappy or Hadoop Snappy object (Firehose's other
                       compressions), recognised by its first bytes: one record, unread

The module imports nothing from the project: Spark ships its functions to the Python
workers by value (see the end of the file), so an executor needs no copy of the project.
"""
from __future__ import annotations

import array
import codecs
import itertools
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from streaming.pipeline import reasons
from streaming.s3_locations import S3_SCHEMES, s3_bucket_and_key, url_scheme

# A DynamoDB item is at most 400 KB and a stream record carries at most two images of it
# (NEW_AND_OLD_IMAGES), in DynamoDB JSON whose descriptors and escaping add up to about
# 2x; 4 MiB leaves room for that and still keeps a runaway record far from executor memory.
MAX_RECORD_BYTES = 4 * 1024 * 1024
# What a `record_too_large` quarantine row keeps of the record, so the operator can see it.
TOO_LARGE_PREFIX_BYTES = 4096
READ_BYTES = 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
# A ZIP archive starts with a local file header, or the end-of-central-directory
# record when it is empty (PKWARE APPNOTE.TXT, 4.3.7 and 4.3.16).
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
# The stream identifier chunk every Snappy framed stream starts with (google/snappy,
# framing_format.txt, 4.1).
SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
# Enough of an object's first bytes to tell these apart: a Hadoop Snappy block's two
# lengths and its chunk's varint preamble take up to 13.
HEAD_BYTES = 16


_NOT_WHITESPACE = re.compile(r"[^ \t\n\r]")
# Junk ends where a line or the next object may start.
_JUNK_END = re.compile(r"[\n{]")
# What precedes a `{` that is a member or item value inside an object or array.
_VALUE_POSITION = frozenset(":,[")
_OUTSIDE_STRING = re.compile(r'[{}"\n]')
_INSIDE_STRING = re.compile(r'["\\\n]')


@dataclass(frozen=True)
class LandingRecord:
    offset: int  # byte offset of the record's first byte in the (decompressed) object
    payload: bytes  # the record's bytes; only a prefix for `record_too_large`
    reason: str | None  # None when the record is one well-formed JSON object


class _DuplicateKey(ValueError):
    pass


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """`object_pairs_hook`, exact at every depth. On generated CDC (1.3 KB records) it made
    parsing about 1.6x slower than plain `raw_decode` (45 vs 28 µs a record, best of 5 on a
    loaded 2-core machine); counting keys in the text and in the re-encoded object instead
    was slower still (155 µs)."""
    values = dict(pairs)
    if len(values) != len(pairs):
        raise _DuplicateKey()
    return values


def _encoded(text: str) -> bytes:
    # surrogateescape gives back exactly the bytes read, invalid UTF-8 included; decode
    # quarantines those as `invalid_utf8`.
    return text.encode("utf-8", "surrogateescape")


class _ObjectEnd:
    """Finds where a broken JSON object ends, across chunks: at the brace that closes it
    (depth counted outside strings), or at the next newline, so that in a newline-delimited
    object a broken record never swallows the lines after it."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def find(self, text: str, start: int, stop: int) -> int | None:
        """Index just after the closing brace or at the newline, or None if not in [start, stop)."""
        i = start
        if self.escaped and i < stop:
            self.escaped = False
            if text[i] == "\n":  # a backslash escapes no raw newline either
                return i
            i += 1
        while i < stop:
            if self.in_string:
                match = _INSIDE_STRING.search(text, i, stop)
                if match is None:
                    return None
                if match.group() == "\n":  # JSON strings hold no raw newline: the record broke off
                    return match.start()
                i = match.end()
                if match.group() == '"':
                    self.in_string = False
                elif i < stop:
                    if text[i] == "\n":  # a backslash escapes no raw newline either
                        return i
                    i += 1
                else:
                    self.escaped = True
                    return None
            else:
                match = _OUTSIDE_STRING.search(text, i, stop)
                if match is None:
                    return None
                char = match.group()
                if char == "\n":
                    return match.start()
                i = match.end()
                if char == '"':
                    self.in_string = True
                elif char == "{":
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth <= 0:
                        return i
        return None


class _JunkEnd:
    """Finds where junk ends, across chunks: at the next newline, or at the next `{` that may
    start a record. Junk at a record's start (`headless`) is often a JSON object whose
    opening bytes are damaged (invalid bytes where its `{` was): a `{` right after `:`, `,`
    or `[` is then a value inside that object, and cutting there would make one damaged
    record many quarantine rows and land its inner objects as records. After a complete
    object (trailing garbage) the object has closed, so any `{` may start the next one."""

    def __init__(self, first: int, headless: bool) -> None:
        self.first = first  # the search starts here in the first chunk, at 0 in later ones
        self.headless = headless
        self.previous = ""  # the last non-whitespace character searched so far

    def find(self, text: str, start: int, stop: int) -> int | None:
        i = max(start, self.first)
        self.first = 0
        while True:
            match = _JUNK_END.search(text, i, stop)
            before = text[i:stop if match is None else match.start()].rstrip(" \t\r")
            if before:
                self.previous = before[-1]
            if match is None:
                return None
            if match.group() == "\n" or not (self.headless and self.previous in _VALUE_POSITION):
                return match.start()
            self.previous = "{"
            i = match.end()


class _Splitter:
    """Cuts one byte stream into `LandingRecord`s, holding at most a window of
    `MAX_RECORD_BYTES` characters (plus one read) in memory."""

    def __init__(self, stream: BinaryIO, max_record_bytes: int) -> None:
        self.stream = stream
        self.limit = max_record_bytes
        self.decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.text = ""
        self.pos = 0
        self.offset = 0  # byte offset of text[pos]
        self.eof = False
        self.read_error: str | None = None
        # Built here, not at import: the module is pickled by value, and a decoder is not.
        self.decode = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys).raw_decode

    def _read(self) -> str:
        try:
            chunk = self.stream.read(READ_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            # What was read before stays; the object ends here with one record naming the error.
            self.read_error = f"{type(exc).__name__}: {exc}"
            chunk = b""
        if not chunk:
            self.eof = True
            return self.decoder.decode(b"", final=True)
        return self.decoder.decode(chunk)

    def _fill(self) -> None:
        """Keep more than `limit` characters ahead of `pos`, or all that is left."""
        if len(self.text) - self.pos > self.limit or self.eof:
            return
        parts = [self.text[self.pos:]]
        have = len(parts[0])
        while have <= self.limit and not self.eof:
            part = self._read()
            parts.append(part)
            have += len(part)
        self.text = "".join(parts)
        self.pos = 0

    def _take(self, start: int, find_end: Callable[[str, int, int], int | None]) -> tuple[bytes, int]:
        """Consume from `start` to where `find_end` says (or the end of the stream); return
        the bytes kept (a prefix when the extent leaves the window) and the extent's size."""
        end = find_end(self.text, start, len(self.text))
        if end is not None:
            kept = _encoded(self.text[start:end])
            self.pos = end
            return kept, len(kept)
        kept = _encoded(self.text[start:])
        size = len(kept)
        self.text, self.pos = "", 0
        if self.eof:
            # The object ends inside the extent, so all of it is in the window: a broken
            # record at the end keeps every byte (`_emit` still cuts one over the limit).
            return kept, size
        kept = kept[:TOO_LARGE_PREFIX_BYTES]
        while not self.eof:
            self.text = self._read()
            end = find_end(self.text, 0, len(self.text))
            stop = len(self.text) if end is None else end
            size += len(_encoded(self.text[:stop]))
            self.pos = stop
            if end is not None:
                break
        return kept, size

    def _emit(self, kept: bytes, size: int, reason: str | None) -> LandingRecord:
        if size > self.limit:
            kept, reason = kept[:TOO_LARGE_PREFIX_BYTES], reasons.RECORD_TOO_LARGE
        if reason is not None:
            # A broken record cut at a newline keeps the line's `\r` otherwise (CRLF files).
            kept = kept.rstrip(b" \t\r\n")
        if reason == reasons.INVALID_JSON and not is_utf8(kept):
            # The decoder's precedence: bytes that are not UTF-8 say so before they fail as JSON.
            reason = reasons.INVALID_UTF8
        record = LandingRecord(self.offset, kept, reason)
        self.offset += size
        return record

    def records(self) -> Iterator[LandingRecord]:
        while True:
            self._fill()
            found = _NOT_WHITESPACE.search(self.text, self.pos)
            if found is None:
                self.offset += len(self.text) - self.pos  # whitespace is ASCII: chars = bytes
                self.pos = len(self.text)
                if self.eof:
                    return
                continue
            self.offset += found.start() - self.pos
            start = self.pos = found.start()
            if self.text[start] != "{":
                yield self._emit(*self._take(start, _JunkEnd(start, headless=True).find), reasons.INVALID_JSON)
                continue
            try:
                end = self.decode(self.text, start)[1]
            except _DuplicateKey:
                yield self._emit(*self._take(start, _ObjectEnd().find), reasons.DUPLICATE_KEY)
                continue
            except (json.JSONDecodeError, RecursionError, ValueError):
                # Malformed, truncated, or larger than the window; or JSON that Python will
                # not read: nested deeper than its recursion limit (RecursionError) or an
                # integer of more digits than its int-string limit (the ValueError of
                # `sys.get_int_max_str_digits`). Either way up to its closing brace or the
                # next newline, wherever that is.
                yield self._emit(*self._take(start, _ObjectEnd().find), reasons.INVALID_JSON)
                continue
            after = _NOT_WHITESPACE.search(self.text, end)
            # Only what follows on the same line is this record's tail.
            if after is None or self.text[after.start()] == "{" or "\n" in self.text[end:after.start()]:
                kept = _encoded(self.text[start:end])
                self.pos = end
                yield self._emit(kept, len(kept), None)
                continue
            garbage_end = _JunkEnd(after.start() + 1, headless=False).find
            yield self._emit(*self._take(start, garbage_end), reasons.TRAILING_GARBAGE)


class _Prefixed:
    """A read-only stream that first returns `head`, then the rest of `stream`."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self.head = head
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size < 0:
                data, self.head = self.head + self.stream.read(), b""
                return data
            data, self.head = self.head[:size], self.head[size:]
            if len(data) < size:
                data += self.stream.read(size - len(data))
            return data
        return self.stream.read(size)


def _head(stream: BinaryIO, size: int) -> bytes:
    """The first `size` bytes of `stream` (fewer only at its end): a read may return less."""
    head = b""
    while len(head) < size:
        more = stream.read(size - len(head))
        if not more:
            break
        head += more
    return head


def _hadoop_snappy_block(head: bytes) -> bool:
    """Whether `head` opens a block of Hadoop's BlockCompressorStream, as Firehose's
    HADOOP_SNAPPY writes it: the block's uncompressed length and its first chunk's
    compressed length (4 bytes big-endian each), then a raw Snappy chunk, whose preamble
    is its uncompressed length as a varint. There is no magic number; under 16 MiB the
    first byte is zero, which no JSON text starts with, and the lengths must agree."""
    if len(head) < 9 or head[0] != 0 or head[4] != 0:
        return False
    block_bytes = int.from_bytes(head[0:4], "big")
    chunk_bytes = int.from_bytes(head[4:8], "big")
    preamble, shift = 0, 0
    for byte in head[8:13]:
        preamble |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return 0 < preamble <= block_bytes and chunk_bytes > 0
    return False


def unsupported_compression(head: bytes) -> str | None:
    """The Firehose compression other than GZIP that an object's first bytes show
    (CompressionFormat ZIP, Snappy or HADOOP_SNAPPY,
    https://docs.aws.amazon.com/firehose/latest/APIReference/API_S3DestinationConfiguration.html),
    or None. Read as text, such an object would become a quarantine row for every
    newline or `{` its compressed bytes happen to hold."""
    if head.startswith(ZIP_MAGICS):
        return "ZIP"
    if head.startswith(SNAPPY_FRAMED_MAGIC):
        return "Snappy"
    if _hadoop_snappy_block(head):
        return "HADOOP_SNAPPY"
    return None


def _decompressed(head: bytes, stream: BinaryIO) -> BinaryIO:
    """The object whose first bytes were `head`, or its GZIP content when it starts with
    the GZIP magic bytes (RFC 1952): Firehose names such objects `.gz`, but a copy may
    have lost the suffix."""
    prefixed = _Prefixed(head, stream)
    if head.startswith(GZIP_MAGIC):
        return _Gunzipped(prefixed)  # type: ignore[return-value]
    return prefixed  # type: ignore[return-value]


class CorruptGzip(OSError):
    """zlib rejected a byte of a GZIP object: bad deflate data, or a member whose CRC-32 or
    length does not match what was decompressed."""


class _Gunzipped:
    """GZIP content of a stream, members one after another (RFC 1952 allows several).

    Unlike `gzip.GzipFile`, a read returns everything decompressed before a corrupt or
    truncated spot; only the read after it raises, so no record before the damage is lost.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self.done = False
        self.consumed = 0  # compressed bytes accepted so far
        self.damage: CorruptGzip | None = None

    def read(self, size: int) -> bytes:
        out = b""
        while not out and not self.done:
            if self.damage is not None:
                self.done = True
                raise self.damage
            raw = self.stream.read(size)
            if not raw:
                self.done = True
                if not self.inflater.eof:
                    raise EOFError("the GZIP stream ends before its end-of-stream marker")
                break
            out = self._inflate_up_to_damage(raw)
        return out

    def _inflate_up_to_damage(self, raw: bytes) -> bytes:
        """What `raw` decompresses to, up to the first byte zlib rejects (then `damage` is set).

        A `decompress` call that fails returns nothing of what it decompressed before the
        bad byte, so the call is repeated from a copy of the inflater on sixteenths of
        `raw`, down to the single byte: about 80 calls for a 1 MiB read, on damage only."""
        before = self.inflater.copy()
        try:
            out = self._inflate(raw)
        except zlib.error as exc:
            self.inflater = before
            if len(raw) == 1:
                self.damage = CorruptGzip(f"zlib rejects compressed byte {self.consumed}: {exc}")
                return b""
            step = -(-len(raw) // 16)
            parts = []
            for start in range(0, len(raw), step):
                parts.append(self._inflate_up_to_damage(raw[start:start + step]))
                if self.damage is not None:
                    break
            return b"".join(parts)
        self.consumed += len(raw)
        return out

    def _inflate(self, raw: bytes) -> bytes:
        out = self.inflater.decompress(raw)
        while self.inflater.eof and self.inflater.unused_data:
            rest = self.inflater.unused_data
            self.inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out += self.inflater.decompress(rest)
        return out


def split_object_records(stream: BinaryIO, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[LandingRecord]:
    """The records of one landing object (GZIP or not); a read error ends the object with
    one `unreadable_file` record naming the error, at the offset reached. An object in
    another Firehose compression is one `unsupported_compression` record naming it."""
    head = _head(stream, HEAD_BYTES)
    compression = unsupported_compression(head)
    if compression is not None:
        message = (f"Firehose CompressionFormat {compression}: not read; the landing reader reads "
                   "GZIP and UNCOMPRESSED objects only")
        yield LandingRecord(0, message.encode(), reasons.UNSUPPORTED_COMPRESSION)
        return
    splitter = _Splitter(_decompressed(head, stream), max_record_bytes)
    yield from splitter.records()
    if splitter.read_error is not None:
        yield LandingRecord(splitter.offset, splitter.read_error.encode(), reasons.UNREADABLE_FILE)


# --------------------------------------------------------------------------- on executors

# The rows of one Arrow batch the splitter hands back to Spark: bounded in count and in
# bytes, so a 128 MiB object never becomes one 128 MiB batch.
OUTPUT_BATCH_ROWS = 4096
OUTPUT_BATCH_BYTES = 32 * 1024 * 1024


def open_landing_object(path: str) -> BinaryIO:
    """Open a path as Spark's file listing spells it: `file:/...` (or a bare local path)
    read directly, `s3://bucket/key` (also s3a, s3n) streamed with boto3's `get_object`,
    which Glue and EMR provide."""
    scheme = url_scheme(path)
    if scheme is None:
        return open(path, "rb")
    if scheme == "file":
        # Hadoop writes `file:/tmp/x`; a URI may also read `file:///tmp/x`.
        return open("/" + path[len("file:"):].lstrip("/"), "rb")
    if scheme in S3_SCHEMES:
        import boto3
        from botocore.exceptions import ClientError

        bucket, key = s3_bucket_and_key(path)
        try:
            return boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"]
        except ClientError as exc:
            # Gone since the listing, or not ours to read: the object's quarantine record
            # says so. Anything else (throttling, network) fails the task, and Spark retries it.
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "AccessDenied", "404", "403"):
                raise OSError(f"{path}: {exc}") from exc
            raise
    raise OSError(f"landing objects under {scheme}:// cannot be read (local paths and s3:// only)")


def _records_of(path: str) -> Iterator[LandingRecord]:
    try:
        stream = open_landing_object(path)
    except (OSError, ImportError) as exc:
        # A file listed but gone, or unreadable: visible in quarantine, never skipped.
        yield LandingRecord(0, f"{type(exc).__name__}: {exc}".encode(), reasons.UNREADABLE_FILE)
        return
    try:
        yield from split_object_records(stream)
    finally:
        stream.close()


def _arrow_column(values: list[bytes | None], kind: "pyarrow.DataType") -> "pyarrow.Array":
    """A binary or UTF-8 column from its values' bytes, assembled from Arrow's three buffers
    (validity, offsets, data). `pyarrow.array` would do the same from Python objects, but
    its first call imports pandas when it is installed (pyarrow's pandas shim checks every
    input for a pandas object): 48 MiB more in each Python worker."""
    import pyarrow as pa

    present = [b"" if value is None else value for value in values]
    offsets = array.array("i", [0])
    offsets.extend(itertools.accumulate(map(len, present)))
    missing = [index for index, value in enumerate(values) if value is None]
    validity = None
    if missing:
        bits = bytearray(b"\xff" * ((len(values) + 7) // 8))
        for index in missing:
            bits[index >> 3] &= 0xFF ^ (1 << (index & 7))
        validity = pa.py_buffer(bytes(bits))
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(present))],
                                 null_count=len(missing))


def _arrow_batch(payloads: list[bytes], refs: list[str], errors: list[str | None]) -> "pyarrow.RecordBatch":
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [_arrow_column(payloads, pa.binary()),
         _arrow_column([ref.encode("utf-8") for ref in refs], pa.string()),
         _arrow_column([None if error is None else error.encode("utf-8") for error in errors], pa.string())],
        names=["payload", "source_ref", "source_error"],
    )


def split_landing_files(batches: Iterable["pyarrow.RecordBatch"]) -> Iterator["pyarrow.RecordBatch"]:
    """`mapInArrow` over rows with a `path` column: one output row per record of each
    file, as `payload` (binary), `source_ref` (`<path>#<byte offset>`), `source_error`."""
    payloads: list[bytes] = []
    refs: list[str] = []
    errors: list[str | None] = []
    held = 0
    for batch in batches:
        for path in batch.column("path").to_pylist():
            for record in _records_of(path):
                payloads.append(record.payload)
                refs.append(f"{path}#{record.offset}")
                errors.append(record.reason)
                held += len(record.payload)
                if len(payloads) >= OUTPUT_BATCH_ROWS or held >= OUTPUT_BATCH_BYTES:
                    yield _arrow_batch(payloads, refs, errors)
                    payloads, refs, errors, held = [], [], [], 0
    if payloads:
        yield _arrow_batch(payloads, refs, errors)


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _ship_by_value() -> None:
    """Let Spark pickle this module's functions by value: Python workers on other machines
    (a standalone cluster, Glue) then need only the standard library and pyarrow."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


_ship_by_value()

