"""What outlives a verification: content keys, the verdict's cache key, and the signed verdict cache."""
