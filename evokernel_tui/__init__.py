"""EvoKernel TUI: the Textual app and the `evokernel` command line."""

__version__ = "0.1.0"
