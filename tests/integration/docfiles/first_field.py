"""One field (`job_id`, or the one named) of the first JSON line on stdin: the job id docs/journals.md
calls $JOB (`s3bulk jobs --json`), the version id docs/transfers.md calls $ID."""

import json
import sys

print(json.loads(sys.stdin.readline())[sys.argv[1] if len(sys.argv) > 1 else "job_id"])
