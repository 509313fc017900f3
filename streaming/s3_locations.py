"""Where an S3 object is, from a path as Spark, Glue or an operator spells it.

Glue and EMR write `s3://bucket/key`, Hadoop's S3A `s3a://bucket/key` (and its retired
S3N `s3n://`); all three name the same object. Imports nothing of `streaming`, so the
contracts registry and the landing reader share it.
"""
from __future__ import annotations

import re

S3_SCHEMES = ("s3", "s3a", "s3n")
# A URL scheme as RFC 3986 spells it; one letter before the colon is a Windows drive.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


def url_scheme(path: str) -> str | None:
    """The scheme of `scheme:...` (`s3://b/k`, Hadoop's `file:/tmp/x`), lower-cased; None
    for a local path, a Windows drive included."""
    found = _SCHEME.match(path)
    return found.group(1).lower() if found else None


def s3_bucket_and_key(path: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key` (or s3a, s3n); a ValueError for any other path.

    Hadoop may also print `s3a:/bucket/key` with one slash; that is the same object.
    """
    scheme = url_scheme(path)
    if scheme not in S3_SCHEMES:
        raise ValueError(f"{path!r} is not an s3:// location")
    bucket, _, key = path[len(scheme) + 1:].lstrip("/").partition("/")
    return bucket, key
