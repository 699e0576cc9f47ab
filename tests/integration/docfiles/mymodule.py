"""The functions docs/map.md's shell examples name (`s3bulk map mymodule:...`)."""

import gzip
import hashlib


def count_and_hash(obj, body):
    return body.count(b"\n"), hashlib.sha256(body).hexdigest()


def gzip_log(obj, body):
    return gzip.compress(body)


def summary(obj, body):
    return {"key": obj.key, "size": len(body)}
