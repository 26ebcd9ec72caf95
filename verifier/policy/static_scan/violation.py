"""One finding of a static or run-time rule: the rule's name, the line (0: not tied to a line) and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"
