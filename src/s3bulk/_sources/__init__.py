"""Sources: streams of work items (listings, local walks), never a whole listing in memory."""
