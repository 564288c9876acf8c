"""Value types the recommendation rules share."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """One log line that shows a finding: the file (or stream) it came from, its 1-based line
    number in that file, and its text as written."""

    file: str
    line: int
    text: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "text": self.text}

    @classmethod
    def from_dict(cls, data: dict) -> "EvidenceLine":
        return cls(str(data["file"]), int(data["line"]), str(data["text"]))
