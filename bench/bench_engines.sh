#!/usr/bin/env bash
# Issue 4's experiments (the seed articles' comparisons), each on loopback and with 20 ms RTT:
# (a) copy 2,000 small objects with every engine, (b) 2,000 x 1 MiB download against the peer
# tools, (c) listing 100,000 keys one page after another vs. concurrent key ranges.
set -euo pipefail
cd "$(dirname "$0")/.."
S3BULK=.venv/bin/s3bulk
RUNS=${RUNS:-3}
$S3BULK bench copy --objects 2000 --size 4KiB --runs "$RUNS" --rtt 0,20ms \
  --strategies serial,threads,async,processes,hybrid,auto \
  --output bench/out/engines-copy.json --chart bench/engines-copy.png
$S3BULK bench download --objects 2000 --size 1MiB --runs "$RUNS" --rtt 0,20ms \
  --strategies s5cmd,rclone,boto3-threads,hybrid,auto \
  --output bench/out/download.json --chart bench/download.png
$S3BULK bench list --objects 100000 --runs "$RUNS" --rtt 0,20ms \
  --strategies paginator,sequential,partitioned \
  --output bench/out/list.json --chart bench/list.png
