"""The scanner on real failures: verbatim excerpts of public bug reports, and real healthy lines.

tests/fixtures/logs/realworld/<family>/sources.tsv lists each excerpt: its id (the file
``<id>.log``), the root-cause category the report's maintainers or reporter established, its kind
(``real``: verbatim from the source; ``benign``: healthy lines that must report nothing;
``composed``: written here to a documented format, never counted), its public address, and who
established the cause. realworld/README.md lists every source.

What is asserted is what a user of ``scan_logs --root`` sees: the root cause of each excerpt
(``root_cause.log_root``) is the established one for at least 95% of the excerpts; no benign file
reports anything; the excerpts report at most 2 categories on average (the root, not every
symptom). The per-category table is printed (``pytest -s``) and is part of any failure message.
"""

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from efficiency.analysis.faults.root_cause import log_root
from efficiency.analysis.faults.scanner import scan_file
from efficiency.analysis.faults.signatures import CATEGORIES

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "realworld"
KINDS = {"real", "benign", "composed"}
MIN_ACCURACY = 0.95
MAX_CATEGORIES_PER_EXCERPT = 2.0
# Where the world offers fewer than 15 excerpts whose own lines show the root (README: why).
SCARCE = {"nccl_socket_fallback"}


@dataclass(frozen=True)
class Excerpt:
    id: str
    category: str
    kind: str
    url: str
    established: str
    path: Path


def _corpus() -> list[Excerpt]:
    rows = []
    for table in sorted(CORPUS.glob("*/sources.tsv")):
        for number, row in enumerate(table.read_text(encoding="utf-8").splitlines(), 1):
            if not row.strip():
                continue
            fields = row.split("\t")
            assert len(fields) == 5, f"{table}:{number}: expected 5 tab-separated fields"
            id_, category, kind, url, established = fields
            rows.append(Excerpt(id_, category, kind, url, established, table.parent / f"{id_}.log"))
    return rows


EXCERPTS = _corpus()
REAL = [e for e in EXCERPTS if e.kind == "real"]
BENIGN = [e for e in EXCERPTS if e.kind == "benign"]


def test_every_row_names_a_file_a_category_and_a_public_source():
    ids = Counter(e.id for e in EXCERPTS)
    assert not [i for i, n in ids.items() if n > 1], "ids must be unique"
    for excerpt in EXCERPTS:
        assert excerpt.kind in KINDS, excerpt.id
        assert excerpt.category in (*CATEGORIES, "-"), excerpt.id
        assert (excerpt.category == "-") == (excerpt.kind == "benign"), excerpt.id
        assert re.match(r"https://\S+$", excerpt.url), excerpt.id
        assert excerpt.established.strip(), excerpt.id
        assert excerpt.path.is_file(), excerpt.path
        assert excerpt.path.read_bytes().endswith(b"\n"), excerpt.path
    listed = {e.path for e in EXCERPTS}
    assert set(CORPUS.glob("*/*.log")) == listed, "every file needs its row"


def test_the_corpus_is_big_enough_to_mean_something():
    assert len(REAL) >= 300
    per = Counter(e.category for e in REAL)
    for category in CATEGORIES:
        assert per[category] >= (10 if category in SCARCE else 15), (category, per[category])
    benign_lines = sum(len(e.path.read_text(encoding="utf-8").splitlines()) for e in BENIGN)
    assert benign_lines >= 150


def test_the_readme_lists_every_source():
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for excerpt in EXCERPTS:
        assert excerpt.url in readme, f"{excerpt.id}: {excerpt.url} is not in realworld/README.md"


def _categories(path: Path) -> tuple[str | None, set[str]]:
    findings = list(scan_file(path, year=2024))
    root = log_root(findings)
    return (root.category if root else None), {f.category for f in findings}


@pytest.fixture(scope="module")
def results():
    return {e.id: _categories(e.path) for e in EXCERPTS if e.kind != "composed"}


def _table(results) -> str:
    right, total = defaultdict(int), Counter()
    for excerpt in REAL:
        total[excerpt.category] += 1
        right[excerpt.category] += results[excerpt.id][0] == excerpt.category
    rows = [f"{c:22} {right[c]:3}/{total[c]:3} {right[c] / total[c]:6.1%}" for c in sorted(total)]
    overall = sum(right.values()) / sum(total.values())
    return "\n".join(
        [*rows, f"{'overall':22} {sum(right.values()):3}/{sum(total.values()):3} {overall:6.1%}"]
    )


def test_the_root_cause_of_real_failures_is_the_established_one(results):
    table = _table(results)
    print("\n" + table)
    wrong = [
        f"{e.id}: expected {e.category}, got {results[e.id][0]} ({sorted(results[e.id][1])})"
        for e in REAL
        if results[e.id][0] != e.category
    ]
    accuracy = 1 - len(wrong) / len(REAL)
    assert accuracy >= MIN_ACCURACY, table + "\n" + "\n".join(wrong)


def test_no_benign_line_is_flagged(results):
    flagged = {e.id: sorted(results[e.id][1]) for e in BENIGN if results[e.id][1]}
    assert flagged == {}


def test_an_excerpt_reports_its_root_not_every_symptom(results):
    mean = sum(len(results[e.id][1]) for e in REAL) / len(REAL)
    assert mean <= MAX_CATEGORIES_PER_EXCERPT
