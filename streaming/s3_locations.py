"""Where an S3 object is, from a path as Spark, Glue or an operator spells it.

Glue and EMR write `s3://bucket/key`, Hadoop's S3A `s3a://bucket/key` (and its retired
S3N `s3n://`); all three name the same object. Imports nothing of `streaming`, so the
contracts registry and the landing reader share it.
"""
from __future__ import annotations

S3_SCHEMES = ("s3", "s3a", "s3n")


def url_scheme(path: str) -> str | None:
    """The scheme of `scheme://...`, lower-cased; None for a path without one."""
    scheme, separator, _ = path.partition("://")
    return scheme.lower() if separator else None


def s3_bucket_and_key(path: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key` (or s3a, s3n); a ValueError for any other path.

    Hadoop may also print `s3a:/bucket/key` with one slash; that is the same object.
    """
    scheme, colon, rest = path.partition(":")
    if not colon or scheme.lower() not in S3_SCHEMES:
        raise ValueError(f"{path!r} is not an s3:// location")
    bucket, _, key = rest.lstrip("/").partition("/")
    return bucket, key
