"""Memory bank: items, store, value-driven retrieval and value updates. Imports neither verifier nor app."""
