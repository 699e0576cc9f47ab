"""The public surface: what `import s3bulk` offers, and what it costs.

Every module is private (`s3bulk._*`) but `s3bulk.testing`; the API is the names in `__all__`,
which `dir()` (and so an IDE) shows instead of whatever private module happened to be loaded."""

from __future__ import annotations


def test_a_test_server_of_s3bulk_testing_leaves_no_directory_behind_and_starts_again_empty() -> None:
    """Users start these servers in their own tests: a throwaway data directory goes when the
    server stops (one was left per server, empty, in the temporary directory), and a server
    started again gets a fresh one."""
    import boto3

    from s3bulk.testing import MinioServer

    server = MinioServer()
    data_dir = server.data_dir

    def client():  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
            region_name="us-east-1",
        )

    with server:
        client().create_bucket(Bucket="kept-till-stop")
        assert [b["Name"] for b in client().list_buckets()["Buckets"]] == ["kept-till-stop"]
    assert not data_dir.exists()
    with server:
        assert client().list_buckets()["Buckets"] == []
    assert not data_dir.exists()
