"""The job journal: a SQLite file per job on this machine (`local.py`), and for the ray
engine its copy in the object store (`store.py`)."""
