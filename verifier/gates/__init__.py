"""The five gates: each reads the evidence of one run and returns a GateResult; none runs candidate code."""
