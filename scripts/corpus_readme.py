"""Rewrite the source tables of tests/fixtures/logs/realworld/README.md from the sources.tsv files.

    .venv/bin/python scripts/corpus_readme.py

Everything above the line ``<!-- sources -->`` is kept as written; below it, one table per family.
"""

from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs" / "realworld"
MARK = "<!-- sources -->"


def main() -> None:
    readme = CORPUS / "README.md"
    head = readme.read_text(encoding="utf-8").split(MARK)[0] if readme.exists() else "# Real-world corpus\n\n"
    parts = [head.rstrip() + "\n\n" + MARK + "\n"]
    for table in sorted(CORPUS.glob("*/sources.tsv")):
        rows = [row.split("\t") for row in table.read_text(encoding="utf-8").splitlines() if row.strip()]
        parts.append(f"\n### `{table.parent.name}/` ({len(rows)} files)\n\n")
        parts.append("| file | category | kind | source | root cause, as established |\n")
        parts.append("| --- | --- | --- | --- | --- |\n")
        for id_, category, kind, url, established in rows:
            text = established.replace("|", "\\|")
            parts.append(f"| `{id_}.log` | {category} | {kind} | {url} | {text} |\n")
    readme.write_text("".join(parts), encoding="utf-8")


if __name__ == "__main__":
    main()
