"""Bulk loading of embeddings into S3 Vectors: payloads, validation, and (to come) the load job."""
