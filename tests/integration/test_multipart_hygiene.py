"""Multipart hygiene (issue 21, item 6), against MinIO: `multipart ls` lists the uploads left
unfinished (key, upload id, start), under a prefix and by age; `multipart abort` aborts exactly
those it selects (their parts go), a dry run none; bad input is one line."""

from __future__ import annotations

import json

from conftest import Endpoint, new_bucket, run_cli

KEYS = ["logs/a", "logs/b b", "logs/c+1", "data/x"]


def start_uploads(endpoint: Endpoint, bucket: str) -> dict[str, str]:
    client = endpoint.client()
    ids = {}
    for key in KEYS:
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"p" * 1024)
        ids[key] = upload
    return ids


def unfinished(endpoint: Endpoint, bucket: str) -> set[str]:
    return {
        upload["Key"] for upload in endpoint.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    }


def test_ls_shows_each_unfinished_upload(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    ids = start_uploads(minio, bucket)
    listed = run_cli(minio.env, "multipart", "ls", f"s3://{bucket}", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {row["key"]: row["upload_id"] for row in rows} == ids
    assert all(row["url"] == f"s3://{bucket}/{row['key']}" and row["initiated"] for row in rows)
    under = run_cli(minio.env, "multipart", "ls", f"s3://{bucket}/logs/")
    assert under.returncode == 0 and "3 unfinished uploads" in under.stderr
    assert sorted(line.split("  ")[1] for line in under.stdout.splitlines()) == [
        f"s3://{bucket}/{key}" for key in sorted(KEYS[:3])
    ]
    young = run_cli(minio.env, "multipart", "ls", f"s3://{bucket}", "--older-than", "1h")
    assert young.returncode == 0 and young.stdout == "" and "0 unfinished uploads" in young.stderr
    before = run_cli(minio.env, "multipart", "ls", f"s3://{bucket}", "--older-than", "2999-01-01")
    assert len(before.stdout.splitlines()) == 4


def test_abort_aborts_what_it_selects(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    start_uploads(minio, bucket)
    young = run_cli(minio.env, "multipart", "abort", f"s3://{bucket}/logs/", "--older-than", "7d")
    assert (
        young.returncode == 0
        and "aborted 0 uploads" in young.stderr
        and unfinished(minio, bucket) == set(KEYS)
    )
    dry = run_cli(minio.env, "multipart", "abort", f"s3://{bucket}/logs/", "--dry-run")
    assert (
        dry.returncode == 0
        and dry.stdout.count("(dryrun) abort: ") == 3
        and "would abort 3 uploads" in dry.stderr
    )
    assert unfinished(minio, bucket) == set(KEYS)
    done = run_cli(minio.env, "multipart", "abort", f"s3://{bucket}/logs/")
    assert done.returncode == 0 and "aborted 3 uploads" in done.stderr, done.stderr
    assert unfinished(minio, bucket) == {"data/x"}


def test_bad_input_is_one_line(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    start_uploads(minio, bucket)
    bad_age = run_cli(minio.env, "multipart", "abort", f"s3://{bucket}", "--older-than", "soon")
    assert bad_age.returncode == 2 and bad_age.stderr.count("\n") == 1
    assert "--older-than 'soon': give an age" in bad_age.stderr
    missing = run_cli(minio.env, "multipart", "ls", "s3://no-such-bucket-here")
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and "NoSuchBucket" in missing.stderr
    assert unfinished(minio, bucket) == set(KEYS)
