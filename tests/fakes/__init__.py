"""Test doubles shared by the test folders, imported as a package (`from tests.fakes.verdicts import ...`).

The repository root is on pytest's `pythonpath` (pyproject.toml), so no test edits `sys.path` to reach them.
"""
