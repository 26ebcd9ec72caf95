"""Building candidates: cached split builds, bindings, shared precompiled artefacts, the toolchain and compiler diagnostics."""
