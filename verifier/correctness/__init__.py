"""The correctness gate: trials, numerics probes, the decoy probe and the pure comparisons of outputs."""
