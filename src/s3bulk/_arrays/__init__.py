"""`gather`: selections out of many chunked HDF5 objects, by concurrent range reads.

files (find the objects) -> index (chunk locations, cached) -> selection + ranges (the plan) ->
job (the engine fetches, decodes, places) -> output (.npy/.csv/.parquet via temp + rename).
"""
