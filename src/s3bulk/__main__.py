"""`python -m s3bulk` runs the CLI."""

from s3bulk._main import main

main()
