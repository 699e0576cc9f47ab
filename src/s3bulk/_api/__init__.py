"""The Python API: plain functions with sync and async twins, like obstore's verbs, one module per
command (`copy`, `sync`, `remove`, ...) as in `s3bulk._commands`, so that a command imports its
own spec and no other command's. `s3bulk` exports each name from its module (PEP 562).

report = s3bulk.copy("s3://src/data/", "s3://dst/data/")
assert report.ok, report.failures

The engine, the signed client and their HTTP stack are imported where used: `gather` (obstore
only) should not pay ~0.4 s for aiohttp.
"""
