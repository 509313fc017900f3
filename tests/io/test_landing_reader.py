"""Landing objects as Firehose writes them, split into records (no Spark)."""
from __future__ import annotations

import gzip
import io
import json
import random
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.io import landing_reader
from streaming.io.landing_reader import (
    MAX_RECORD_BYTES,
    TOO_LARGE_PREFIX_BYTES,
    LandingRecord,
    open_landing_object,
    split_object_records,
)


def split(data: bytes, **options) -> list[tuple[int, bytes, str | None]]:
    return [(r.offset, r.payload, r.reason) for r in split_object_records(io.BytesIO(data), **options)]


def test_records_concatenated_without_delimiter_are_each_a_record():
    # Firehose without the AppendDelimiterToRecord processor writes records back to back.
    assert split(b'{"a":1}{"b":{"c":"}{"}}{"d":3}') == [
        (0, b'{"a":1}', None), (7, b'{"b":{"c":"}{"}}', None), (23, b'{"d":3}', None)]


def test_newline_delimited_and_crlf_records():
    assert split(b'{"a":1}\r\n\r\n  {"b":2}\n\t') == [(0, b'{"a":1}', None), (13, b'{"b":2}', None)]


@pytest.mark.parametrize("tail", [b" xyz", b",", b"]", b' "x"'])
def test_an_object_followed_by_garbage_on_its_line_is_quarantined_whole(tail):
    data = b'{"a":1}' + tail + b'{"b":2}\n{"c":3}' + tail + b"\n{\"d\":4}"
    assert split(data) == [
        (0, b'{"a":1}' + tail, "trailing_garbage"),
        (7 + len(tail), b'{"b":2}', None),
        (15 + len(tail), b'{"c":3}' + tail, "trailing_garbage"),
        (23 + 2 * len(tail), b'{"d":4}', None),
    ]


def test_duplicate_keys_at_any_depth_are_quarantined():
    top = b'{"eventName":"INSERT","eventName":"REMOVE"}'
    nested = b'{"dynamodb":{"NewImage":{"id":{"S":"a"},"id":{"S":"b"}}}}'
    assert split(top + nested + b'{"ok":1}') == [
        (0, top, "duplicate_key"), (len(top), nested, "duplicate_key"), (len(top) + len(nested), b'{"ok":1}', None)]


def test_junk_and_broken_objects_end_at_the_next_line_or_object():
    data = b'<html>502</html>{"a":1}\nnot json at all\r\n{"b": "trunc\n{"c":3}\n{"d":\n'
    assert split(data) == [
        (0, b"<html>502</html>", "invalid_json"),
        (16, b'{"a":1}', None),
        (24, b"not json at all", "invalid_json"),
        (41, b'{"b": "trunc', "invalid_json"),
        (54, b'{"c":3}', None),
        (62, b'{"d":', "invalid_json"),
    ]


@pytest.mark.parametrize("read_bytes", [3, 64 * 1024])
def test_a_record_cut_off_after_a_backslash_ends_at_its_newline(monkeypatch, read_bytes):
    # The 2M-event bench found this one: the generator truncates a record inside a string
    # right after a backslash. Read as an escaped newline, it swallowed the next record.
    monkeypatch.setattr(landing_reader, "READ_BYTES", read_bytes)
    data = b'{"custName":{"S":"Farah Garc\\\n{"eventID":"next"}\n'
    assert split(data) == [
        (0, b'{"custName":{"S":"Farah Garc\\', "invalid_json"),
        (30, b'{"eventID":"next"}', None),
    ]


def test_invalid_utf8_bytes_are_passed_through_unchanged():
    # decode quarantines them as invalid_utf8; the splitter must neither drop nor alter them.
    assert split(b'{"a":"x\xff\xfe"}{"b":"\xc3\xa9"}') == [
        (0, b'{"a":"x\xff\xfe"}', None), (11, b'{"b":"\xc3\xa9"}', None)]


class Generated(io.RawIOBase):
    """A stream of `size` bytes made on the fly, so the test itself holds no large buffer."""

    def __init__(self, head: bytes, filler: bytes, size: int, tail: bytes) -> None:
        self.parts = [head, None, tail]
        self.filler, self.left = filler, size

    def read(self, n: int = -1) -> bytes:
        if self.parts[0]:
            out, self.parts[0] = self.parts[0], b""
            return out
        if self.left:
            take = min(n, self.left)
            self.left -= take
            return self.filler * take
        out, self.parts[2] = self.parts[2], b""
        return out


def test_a_50_mb_record_is_skipped_without_being_held_and_the_next_record_lands():
    size = 50 * 1024 * 1024
    stream = Generated(b'{"eventName":"INSERT","blob":"', b"x", size, b'"}{"ok":1}')
    tracemalloc.start()
    try:
        records = list(split_object_records(stream))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(r.offset, r.reason) for r in records] == [(0, "record_too_large"), (size + 32, None)]
    assert records[0].payload == (b'{"eventName":"INSERT","blob":"' + b"x" * size)[:TOO_LARGE_PREFIX_BYTES]
    assert records[1].payload == b'{"ok":1}'
    # The window (4 MiB of text) and one read, never the 50 MB record.
    assert peak < 6 * MAX_RECORD_BYTES


def test_a_record_over_the_limit_in_bytes_is_too_large_even_when_its_text_is_shorter():
    record = ('{"a":"' + "é" * 30 + '"}').encode()  # 38 characters, 68 bytes
    assert split(record + b'{"b":1}', max_record_bytes=50) == [
        (0, record, "record_too_large"), (len(record), b'{"b":1}', None)]


def test_gzip_is_recognised_by_its_magic_bytes_members_included():
    data = gzip.compress(b'{"a":1}{"b":2}') + gzip.compress(b'{"c":3}')
    assert split(data) == [(0, b'{"a":1}', None), (7, b'{"b":2}', None), (14, b'{"c":3}', None)]


def test_a_truncated_gzip_object_keeps_the_records_before_the_damage():
    content = b"".join(b'{"n":%d}' % n for n in range(200_000))
    compressed = gzip.compress(content)
    records = split(compressed[: len(compressed) // 2])
    assert records[-1][2] == "unreadable_file" and b"end-of-stream" in records[-1][1]
    landed = [payload for _, payload, reason in records if reason is None]
    assert len(landed) > 50_000
    assert landed == [b'{"n":%d}' % n for n in range(len(landed))]
    # Everything read before the damage is accounted for: the records, then the cut one.
    assert [reason for _, _, reason in records[len(landed):]] in (["unreadable_file"], ["invalid_json", "unreadable_file"])


CDC_LINES = [b'{"eventID":"%06d","n":%d}' % (n, n * 7919 % 100_003) for n in range(20_000)]
CDC_OBJECT = b"".join(line + b"\n" for line in CDC_LINES)


def test_a_corrupt_gzip_object_keeps_the_records_before_the_damage():
    compressed = bytearray(gzip.compress(CDC_OBJECT, mtime=0))
    damage_at = len(compressed) // 3
    for index in range(damage_at, damage_at + 8):
        compressed[index] ^= 0xFF
    # What the bytes before the damage decompress to is what a reader can trust.
    intact = zlib.decompressobj(wbits=31).decompress(bytes(compressed[:damage_at]))
    intact_records = intact.count(b"\n")

    records = split(bytes(compressed))

    landed = [payload for _, payload, reason in records if reason is None]
    assert intact_records > 5_000
    assert landed == CDC_LINES[:intact_records]
    offset, message, reason = records[-1]
    assert reason == "unreadable_file"
    assert message.startswith(b"CorruptGzip: zlib rejects compressed byte ") and b"invalid block type" in message
    assert int(message.split()[5].rstrip(b":")) >= damage_at
    # zlib notices the damage a few bytes on; what those decoded to is no JSON and is
    # quarantined with the record the damage cut.
    assert {reason for _, _, reason in records[len(landed):-1]} <= {"invalid_json"}


@pytest.mark.parametrize(("trailer_byte", "check"), [(-8, b"incorrect data check"), (-1, b"incorrect length check")])
def test_a_gzip_trailer_that_does_not_match_keeps_every_record_and_names_the_check(trailer_byte, check):
    # The trailer holds the member's CRC-32, then its length mod 2^32 (RFC 1952, 2.3.1).
    compressed = bytearray(gzip.compress(CDC_OBJECT, mtime=0))
    compressed[trailer_byte] ^= 0xFF

    records = split(bytes(compressed))

    assert [payload for _, payload, reason in records[:-1]] == CDC_LINES
    offset, message, reason = records[-1]
    assert (offset, reason) == (len(CDC_OBJECT), "unreadable_file")
    assert check in message


def test_a_corrupt_second_member_keeps_the_first_members_records():
    second = bytearray(gzip.compress(b'{"b":1}' * 1000, mtime=0))
    second[len(second) // 2] ^= 0xFF
    records = split(gzip.compress(b'{"a":1}{"a":2}') + bytes(second))
    assert records[:2] == [(0, b'{"a":1}', None), (7, b'{"a":2}', None)]
    assert records[-1][2] == "unreadable_file" and records[-1][1].startswith(b"CorruptGzip")


NESTED_TOO_DEEP = b'{"a":' * 3_000 + b"1" + b"}" * 3_000
LISTS_TOO_DEEP = b'{"a":' + b"[" * 3_000 + b"]" * 3_000 + b"}"
TOO_MANY_DIGITS = b'{"n":' + b"9" * 5_000 + b"}"


@pytest.mark.parametrize(("record", "reason"), [
    (NESTED_TOO_DEEP, "invalid_json"),
    (LISTS_TOO_DEEP, "invalid_json"),
    (TOO_MANY_DIGITS, "invalid_json"),
    (b'{"n":-' + b"1" * (sys.get_int_max_str_digits() + 1) + b"}", "invalid_json"),
    # The duplicate-key hook runs when an object closes: the first problem the parser
    # meets names the record.
    (b'{"k":1,"k":2,"deep":' + LISTS_TOO_DEEP[5:], "invalid_json"),
    (b'{"k":' + b"9" * 5_000 + b',"k":1}', "invalid_json"),
    (b'{"k":{"k":1,"k":2},"n":' + b"9" * 5_000 + b"}", "duplicate_key"),
])
def test_json_that_python_cannot_read_is_quarantined_and_the_next_record_lands(record, reason):
    # Nested 3,000 deep (RecursionError) or an integer longer than Python's int-string
    # limit (ValueError): neither may escape the splitter, or every restart of the stream
    # fails on the same object.
    assert split(record + b'{"ok":1}\n' + record) == [
        (0, record, reason), (len(record), b'{"ok":1}', None), (len(record) + 9, record, reason)]


def test_a_broken_record_longer_than_the_kept_prefix_at_the_end_of_an_object_keeps_every_byte():
    # Found by the property test below: the prefix kept of a record too large was applied
    # to any broken record the object ended in.
    cut_off = b'{"a":' * 820
    assert split(b'{"ok":1}' + cut_off) == [(0, b'{"ok":1}', None), (8, cut_off, "invalid_json")]


def test_a_duplicate_key_inside_a_deep_but_readable_record_is_still_found():
    nested = b'{"a":' * 100 + b'{"k":1,"k":2}' + b"}" * 100
    assert split(nested) == [(0, nested, "duplicate_key")]


HOSTILE_PIECES = st.one_of(
    st.builds(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth, st.integers(1, 4_000)),
    st.builds(lambda depth: b'{"a":' + b"[" * depth + b"]" * depth + b"}", st.integers(1, 4_000)),
    st.builds(lambda digits, sign: b'{"n":' + sign + b"7" * digits + b"}", st.integers(1, 6_000), st.sampled_from([b"", b"-"])),
    st.builds(lambda depth: b'{"a":' * depth, st.integers(1, 4_000)),  # cut off
    st.sampled_from([b'{"k":1,"k":2}', b'{"ok":1}', b"junk", b"]", b'"', b"\\", b"{", b"}", b" xyz"]),
)


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.tuples(HOSTILE_PIECES, st.sampled_from([b"", b"\n", b" ", b"\r\n"])), max_size=6))
def test_the_splitter_survives_deep_nesting_and_long_numbers_and_loses_no_byte(pieces):
    data = b"".join(piece + separator for piece, separator in pieces)
    records = split(data)
    end = 0
    for offset, payload, reason in records:
        assert offset >= end and data[offset:offset + len(payload)] == payload
        assert reason in (None, "invalid_json", "trailing_garbage", "duplicate_key")
        if reason is None:
            json.loads(payload)
        end = offset + len(payload)
    # Every byte outside the records is whitespace the splitter may skip.
    outside = bytearray(data)
    for offset, payload, _ in records:
        outside[offset:offset + len(payload)] = b" " * len(payload)
    assert not outside.strip()


def test_splitting_does_not_depend_on_where_reads_end(monkeypatch):
    rng = random.Random(5)
    pieces = [json.dumps({"k": "é" * rng.randint(0, 5) + '\\"}{' * rng.randint(0, 2), "n": n}).encode()
              for n in range(200)]
    pieces[50] += b" junk"
    pieces[120] = b'{"dup":1,"dup":2}'
    data = b"".join(piece + rng.choice([b"", b"\n", b" "]) for piece in pieces)
    whole = split(data)
    monkeypatch.setattr(landing_reader, "READ_BYTES", 3)
    assert split(data) == whole
    assert [r for r in whole if r[2]] == [
        (whole[50][0], pieces[50], "trailing_garbage"), (whole[120][0], pieces[120], "duplicate_key")]
    assert len(whole) == 200


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def zip_object(content: bytes) -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as writing:
        writing.writestr("records", content)
    return archive.getvalue()


def snappy_framed_object(content: bytes) -> bytes:
    """google/snappy framing_format.txt: the stream identifier, then a compressed chunk
    with the masked CRC-32C of its uncompressed data."""
    crc = crc32c(content)
    masked = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    body = masked.to_bytes(4, "little") + pa.compress(content, codec="snappy", asbytes=True)
    return b"\xff\x06\x00\x00sNaPpY" + b"\x00" + len(body).to_bytes(3, "little") + body


def hadoop_snappy_object(content: bytes) -> bytes:
    """Hadoop's BlockCompressorStream: uncompressed length, compressed length (4 bytes
    big-endian each), then the raw Snappy chunk."""
    chunk = pa.compress(content, codec="snappy", asbytes=True)
    return len(content).to_bytes(4, "big") + len(chunk).to_bytes(4, "big") + chunk


@pytest.mark.parametrize(("compress", "name"), [
    (zip_object, b"ZIP"), (snappy_framed_object, b"Snappy"), (hadoop_snappy_object, b"HADOOP_SNAPPY")])
def test_other_firehose_compressions_are_one_unsupported_compression_record(compress, name):
    content = b"".join(b'{"eventID":"%d"}\n' % n for n in range(500))
    ((offset, message, reason),) = split(compress(content))
    assert (offset, reason) == (0, "unsupported_compression")
    assert message.startswith(b"Firehose CompressionFormat " + name + b":")


def test_objects_that_merely_start_like_a_compression_are_read_as_text():
    assert split(b'PK{"a":1}') == [(0, b"PK", "invalid_json"), (2, b'{"a":1}', None)]
    assert split(b"\x00\x00\x00") == [(0, b"\x00\x00\x00", "invalid_json")]


def test_a_missing_file_is_one_unreadable_record(tmp_path):
    records = list(landing_reader._records_of(f"file:{tmp_path}/gone"))
    assert [(r.offset, r.reason) for r in records] == [(0, "unreadable_file")]
    assert b"FileNotFoundError" in records[0].payload


def test_local_paths_as_spark_spells_them(tmp_path):
    path = tmp_path / "a b"
    path.write_bytes(b'{"a":1}')
    for spelled in (f"file:{path}", f"file://{path}", str(path)):
        assert [r.payload for r in landing_reader._records_of(spelled)] == [b'{"a":1}']
    assert isinstance(list(landing_reader._records_of("hdfs://nn/x"))[0], LandingRecord)


def test_s3_objects_are_streamed_with_boto3(mocked_aws):
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="landing", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    key = "cdc/2026/11/23/10/ddb-cdc-1-2026-11-23-10-00-00-5d1e2f3a-0b1c-4d2e-9f3a-4b5c6d7e8f90.gz"
    s3.put_object(Bucket="landing", Key=key, Body=gzip.compress(b'{"a":1}{"a":2} xyz'))

    for scheme in ("s3", "s3a"):
        records = list(landing_reader._records_of(f"{scheme}://landing/{key}"))
        assert [(r.offset, r.payload, r.reason) for r in records] == [
            (0, b'{"a":1}', None), (7, b'{"a":2} xyz', "trailing_garbage")]
    (missing,) = landing_reader._records_of("s3://landing/cdc/gone")
    assert missing.reason == "unreadable_file" and b"NoSuchKey" in missing.payload


def test_broken_bytes_that_are_not_utf8_are_quarantined_as_invalid_utf8_as_the_decoder_would():
    # A record whose opening brace was replaced by a UTF-16 byte-order mark: neither JSON
    # nor UTF-8; the decoder checks UTF-8 first, and so does the splitter.
    records = split(b'\xff\xfe"eventID":"e1"}\n{"eventID":"e2"}\n')
    assert [(payload, reason) for _, payload, reason in records] == [
        (b'\xff\xfe"eventID":"e1"}', "invalid_utf8"),
        (b'{"eventID":"e2"}', None),
    ]


@pytest.mark.parametrize("separator", [b"", b"\n"])
def test_a_record_whose_opening_brace_is_damaged_is_one_row_and_the_next_record_lands(separator):
    # The fuzz drill's invalid_utf8_structural kind: the inner objects of the damaged
    # record (map values, list items) must not be cut out as records of their own.
    damaged = (b'\xff\xfe"eventID":"e1","dynamodb":{"Keys":{"id":{"S":"a"}},'
               b'"NewImage":{"tags":{"L":[{"M":{"k":{"S":"v"}}}, {"M":{}}]}}},"eventName":"INSERT"}')
    assert split(damaged + separator + b'{"eventID":"e2"}') == [
        (0, damaged, "invalid_utf8"),
        (len(damaged + separator), b'{"eventID":"e2"}', None),
    ]


def test_junk_still_ends_at_an_object_that_follows_it_on_its_line():
    assert split(b'not json 0.5{"a":1}\n["x"]{"b":2}') == [
        (0, b"not json 0.5", "invalid_json"), (12, b'{"a":1}', None),
        (20, b'["x"]', "invalid_json"), (25, b'{"b":2}', None)]


def test_a_landing_object_opens_by_every_local_spelling_and_another_scheme_is_refused(tmp_path: Path) -> None:
    # Spark lists local files as `file:/...`; a URI may read `file:///...`; a colon inside
    # a folder name is no scheme.
    landed = tmp_path / "hour:00" / "cdc-000001.jsonl"
    landed.parent.mkdir()
    landed.write_bytes(b'{"eventName": "INSERT"}\n')
    for path in (f"file:{landed}", f"FILE://{landed}", str(landed)):
        with open_landing_object(path) as stream:
            assert stream.read() == landed.read_bytes()
    with pytest.raises(OSError, match="landing objects under gs:// cannot be read"):
        open_landing_object("gs://lake/landing/cdc-000001.jsonl")


def test_the_arrow_batches_hold_what_pyarrow_builds_from_the_same_values(tmp_path: Path) -> None:
    name = tmp_path / "caf\u00e9 #1.jsonl"
    name.write_bytes(b'{"a":1}\n{}\nnot json\n{"\\u00e9":"\xc3\xa9"}{"b":2} tail\n')
    paths = pa.RecordBatch.from_arrays([pa.array([str(name)])], names=["path"])

    batches = list(landing_reader.split_landing_files([paths]))

    records = list(landing_reader.split_object_records(io.BytesIO(name.read_bytes())))
    expected = pa.RecordBatch.from_arrays(
        [pa.array([record.payload for record in records], pa.binary()),
         pa.array([f"{name}#{record.offset}" for record in records], pa.string()),
         pa.array([record.reason for record in records], pa.string())],
        names=["payload", "source_ref", "source_error"],
    )
    assert len(batches) == 1
    batches[0].validate(full=True)
    assert batches[0].equals(expected)
    assert batches[0].column(2).null_count == 3


def test_splitting_files_into_arrow_batches_does_not_import_pandas(tmp_path: Path) -> None:
    # pyarrow.array imports pandas on its first call when pandas is installed, as it is here.
    landing = tmp_path / "x.jsonl"
    landing.write_bytes(b'{"a":1}\nnot json\n')
    # The input batch as Spark hands it over: an Arrow stream, whose reading imports nothing more.
    paths = pa.RecordBatch.from_arrays([pa.array([str(landing)])], names=["path"])
    with pa.OSFile(str(tmp_path / "paths.arrow"), "wb") as sink, pa.ipc.new_stream(sink, paths.schema) as writer:
        writer.write_batch(paths)
    script = ("import sys, pyarrow as pa\n"
              "from streaming.io.landing_reader import split_landing_files\n"
              f"paths = pa.ipc.open_stream(pa.OSFile({str(tmp_path / 'paths.arrow')!r})).read_next_batch()\n"
              "assert 'pandas' not in sys.modules\n"
              "print(sum(batch.num_rows for batch in split_landing_files([paths])), 'pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["2", "False"]
