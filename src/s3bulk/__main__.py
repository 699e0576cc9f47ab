"""`python -m s3bulk` runs the CLI."""

from s3bulk.cli import main

main()
