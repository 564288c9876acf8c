"""Rewrite the signature table of README.md's fault section from the catalog.

    .venv/bin/python scripts/catalog_readme.py

The table stands between ``<!-- families -->`` and ``<!-- /families -->``; everything else in
the README is kept as written. tests/analysis/faults/test_scanner.py checks it lists every signature.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from efficiency.analysis.faults.signatures import SIGNATURES, THROUGHPUT_DROP  # noqa: E402

START, END = "<!-- families -->", "<!-- /families -->"


def table() -> str:
    rows = [
        "| signature | category | severity | what it reads |",
        "| --- | --- | --- | --- |",
    ]
    for signature in (*SIGNATURES, THROUGHPUT_DROP):
        extra = ""
        if signature.after:
            extra = f" (after a line with `{signature.after}`)"
        title = signature.title.replace("|", "\\|")
        rows.append(f"| `{signature.id}` | {signature.category} | {signature.severity} | {title}{extra} |")
    return "\n".join(rows)


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1) if END in rest else ("", rest)
    readme.write_text(f"{head}{START}\n\n{table()}\n\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
