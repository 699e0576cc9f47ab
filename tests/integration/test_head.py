"""`s3bulk head` / `stat` against MinIO: what HEAD says of one object, and of every object under
a prefix, is what boto3 says of it."""

from __future__ import annotations

import json

from conftest import Endpoint, new_bucket, run_cli


def test_head_shows_every_attribute_of_one_object(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    client.put_object(
        Bucket=bucket,
        Key="site/index.html",
        Body=b"<html>",
        ContentType="text/html",
        CacheControl="max-age=60",
        Metadata={"owner": "ops"},
    )
    done = run_cli(minio.env, "head", "--json", f"s3://{bucket}/site/index.html")
    assert done.returncode == 0, done.stderr
    (found,) = [json.loads(line) for line in done.stdout.splitlines()]
    head = client.head_object(Bucket=bucket, Key="site/index.html")
    assert found["url"] == f"s3://{bucket}/site/index.html"
    assert (found["size"], found["etag"], found["content_type"]) == (6, head["ETag"].strip('"'), "text/html")
    assert (found["cache_control"], found["metadata"], found["storage_class"]) == (
        "max-age=60",
        {"owner": "ops"},
        "STANDARD",
    )
    human = run_cli(minio.env, "stat", f"s3://{bucket}/site/index.html")
    assert human.returncode == 0 and human.stdout.splitlines()[0] == f"s3://{bucket}/site/index.html"
    assert "  content-type              text/html" in human.stdout.splitlines()


def test_head_of_a_prefix_heads_every_object_and_a_missing_one_fails(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    keys = [f"p/{n:03d}.json" for n in range(40)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=b"{}", ContentType="application/json")
    done = run_cli(minio.env, "head", "--json", "--stats", f"s3://{bucket}/p/")
    assert done.returncode == 0, done.stderr
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(each["url"] for each in found) == [f"s3://{bucket}/{key}" for key in keys]
    assert {each["content_type"] for each in found} == {"application/json"}
    assert "HEAD 40" in done.stdout  # --stats: one HEAD per object
    missing = run_cli(minio.env, "head", f"s3://{bucket}/p/none.json")
    assert missing.returncode == 1 and "NoSuchKey" in missing.stderr and missing.stdout == ""
    bad = run_cli(minio.env, "head", "s3://B/x")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
