"""Built-in KernelBench-format task files; metadata lives in index.json next to them."""
