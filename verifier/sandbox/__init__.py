"""The boundary around untrusted code: bubblewrap namespaces, resource limits, and reading processes from /proc."""
