"""Plans: filters and key mapping between a source listing and a destination."""
