"""CSV downloads: streamed in constant memory, and inert in spreadsheet programs."""

import csv
import io

import pytest
from django.http import StreamingHttpResponse
from hypothesis import given
from hypothesis import strategies as st

from efficiency.views.helpers import CSV_BATCH_ROWS, csv_cell_text, csv_response

FORMULA_STARTS = ["=", "+", "-", "@", "\t", "\r"]
LEADING_SPACE = st.text(alphabet=" \t\r\n\u00a0\u3000", max_size=3)


def test_a_csv_download_sends_its_first_rows_before_reading_the_rest():
    read = 0

    def rows():
        nonlocal read
        for i in range(10 * CSV_BATCH_ROWS):
            read += 1
            yield [i, f"job-{i}"]

    response = csv_response("jobs.csv", ["id", "name"], rows())
    assert isinstance(response, StreamingHttpResponse)
    chunks = iter(response.streaming_content)
    assert next(chunks).decode("utf-8").startswith("\ufeffid,name")
    assert next(chunks).startswith(b"0,job-0")
    assert read <= CSV_BATCH_ROWS + 1  # one batch in memory, not ten
    assert sum(1 for _ in chunks) == 9


@pytest.mark.django_db
def test_the_job_list_export_is_streamed(client, org):
    client.force_login(org.admin)
    response = client.get("/jobs/?export=csv")
    assert response.streaming
    rows = list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))
    assert {row["Name"] for row in rows} == {"vision-train", "radar-train"}


@given(start=st.sampled_from(FORMULA_STARTS), rest=st.text(max_size=20))
def test_every_formula_start_is_quoted(start, rest):
    assert csv_cell_text(start + rest) == "'" + start + rest


@given(start=st.sampled_from("=+-@"), space=LEADING_SPACE, rest=st.text(max_size=20))
def test_a_formula_behind_leading_whitespace_is_quoted(start, space, rest):
    value = space + start + rest
    assert csv_cell_text(value) == "'" + value


@given(st.text(max_size=30))
def test_a_cell_that_is_no_formula_is_left_as_it_is(value):
    if value[:1] in FORMULA_STARTS or value.lstrip()[:1] in FORMULA_STARTS:
        return
    assert csv_cell_text(value) == value


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["\t=cmd|' /C calc'!A0", '  =HYPERLINK("https://evil.example")', "\r@SUM(1)"]
)
def test_a_job_named_like_a_formula_is_exported_inert(client, org, name):
    org.job_a.name = name
    org.job_a.save()
    client.force_login(org.admin)
    rows = csv.DictReader(io.StringIO(client.get("/jobs/?export=csv").getvalue().decode("utf-8-sig")))
    assert {row["Name"] for row in rows} == {"'" + name, "radar-train"}


def test_csv_times_are_in_the_portal_day_zone_with_their_offset(settings):
    # Every export writes times in one zone, the portal day's, each labelled with its offset:
    # Berlin in summer is +02:00, in winter +01:00; a moment the zone cannot hold stays in UTC.
    from datetime import UTC, datetime

    from efficiency.views.helpers import _csv_cell

    settings.TIME_ZONE = "Europe/Berlin"
    assert _csv_cell(datetime(2026, 7, 1, 10, 0, tzinfo=UTC)) == "2026-07-01T12:00:00+02:00"
    assert _csv_cell(datetime(2026, 1, 1, 10, 0, tzinfo=UTC)) == "2026-01-01T11:00:00+01:00"
    assert _csv_cell(datetime(9999, 12, 31, 23, 30, tzinfo=UTC)) == "9999-12-31T23:30:00+00:00"
