"""s3bulk."""
