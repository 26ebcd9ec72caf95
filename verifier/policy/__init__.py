"""What a candidate may do: the rule registry and presets, the static scan, and the audits of what it built and mapped."""
