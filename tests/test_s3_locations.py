"""The one reading of an S3 path, shared by the contract registry and the landing reader."""
import pytest

from streaming.s3_locations import s3_bucket_and_key, url_scheme


@pytest.mark.parametrize("path", ["s3://lake/raw/a b.json", "s3a://lake/raw/a b.json", "S3N://lake/raw/a b.json",
                                  "s3a:/lake/raw/a b.json"])
def test_every_spelling_of_an_s3_object_names_the_same_bucket_and_key(path: str) -> None:
    assert s3_bucket_and_key(path) == ("lake", "raw/a b.json")


@pytest.mark.parametrize("path", ["gs://lake/raw", "/tmp/s3/raw", "file:/tmp/raw", "s3-lake/raw"])
def test_a_path_that_is_not_on_s3_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="is not an s3:// location"):
        s3_bucket_and_key(path)


def test_a_scheme_is_read_as_the_s3_split_reads_it_and_a_local_path_has_none() -> None:
    assert [url_scheme(path) for path in ("S3A://lake/raw", "s3a:/lake/raw", "file:/tmp/raw", "/tmp/raw", "C:/raw",
                                          "/tmp/a:b/raw")] == ["s3a", "s3a", "file", None, None, None]
