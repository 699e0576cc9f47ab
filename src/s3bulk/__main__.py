"""`python -m s3bulk` runs the CLI."""

from s3bulk._cli import main

main()
