"""The only code that does I/O: obstore for object data, a signed client for the rest."""
