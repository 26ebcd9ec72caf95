"""Profiling beyond the gates: the optional Nsight Compute run and its summary for the refine prompt."""
