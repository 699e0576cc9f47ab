"""`s3bulk bench`: run one workload once per engine (and per peer tool), interleaved, and report
medians the way the seed articles did; optionally behind a real added round-trip time."""
