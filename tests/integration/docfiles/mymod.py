"""The function docs/transfers.md's `s3bulk map mymod:fn` names."""


def fn(obj, body):
    return body.upper()
