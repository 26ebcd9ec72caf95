"""The attested clock: paired, interleaved timing rounds of the trusted reference and the candidate, and the evidence that no work was hidden from them."""
