"""Tasks, backends, the draft/refine loop, model calls and sessions."""
