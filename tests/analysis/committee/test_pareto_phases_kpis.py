"""Pareto, incident phase distributions and KPI rows, checked by hand."""

from datetime import UTC, datetime, timedelta

from efficiency.analysis.committee.kpis import kpi_rows, on_target, previous_values
from efficiency.analysis.committee.pareto import idle_pareto, pareto
from efficiency.analysis.committee.phases import IncidentTimes, phase_distributions

T0 = datetime(2026, 11, 1, tzinfo=UTC)
M = timedelta(minutes=1)


def test_pareto_sorted_with_shares():
    rows = pareto([(("a",), 1.0), (("b",), 3.0), (("c",), 0.0), (("d",), 1.0)])
    assert [r.key for r in rows] == [("b",), ("a",), ("d",)]
    assert [r.share for r in rows] == [0.6, 0.2, 0.2]
    assert rows[-1].cumulative == 1.0


def test_idle_pareto():
    assert idle_pareto([("A", 5.0, 1.0), ("B", 0.0, 7.5)]) == [
        {"department": "B", "cause": "allocated_idle", "gpu_hours": 7.5},
        {"department": "A", "cause": "unused_guarantee", "gpu_hours": 5.0},
        {"department": "A", "cause": "allocated_idle", "gpu_hours": 1.0},
    ]


def test_phase_distributions():
    incidents = [
        IncidentTimes(T0, T0 + 1 * M, T0 + 3 * M, T0 + 4 * M, T0 + 10 * M),
        IncidentTimes(T0, T0 + 3 * M, T0 + 4 * M, None, T0 + 5 * M),
        IncidentTimes(T0, T0 + 5 * M),  # still open
    ]
    phases = phase_distributions(incidents)
    assert phases["detect"] == {"p50": 180.0, "p90": 276.0, "max": 300.0, "n": 3}
    assert phases["locate"] == {"p50": 90.0, "p90": 114.0, "max": 120.0, "n": 2}
    assert phases["restart"] == {"p50": 60.0, "p90": 60.0, "max": 60.0, "n": 1}
    # recover: restart → recovered (6 min), else located → recovered (1 min)
    assert phases["recover"] == {"p50": 210.0, "p90": 330.0, "max": 360.0, "n": 2}
    assert phase_distributions([])["detect"] == {"p50": None, "p90": None, "max": None, "n": 0}


def test_kpi_rows():
    previous = {"summary": {"kpis": [{"key": "utilization", "value": 0.4}]}}
    rows = kpi_rows(
        {"utilization": 0.41234567, "overdue_tickets": 3, "mttr_s": None},
        previous=previous_values(previous),
        targets={"utilization": 0.45, "overdue_tickets": 0},
    )
    by_key = {row["key"]: row for row in rows}
    assert [row["key"] for row in rows] == [
        "utilization",
        "allocation_rate",
        "idle_gpu_hours",
        "mttr_s",
        "ettr",
        "overdue_tickets",
    ]
    assert by_key["utilization"] == {
        "key": "utilization",
        "value": 0.412346,
        "previous": 0.4,
        "target": 0.45,
        "unit": "ratio",
        "better": "higher",
    }
    assert on_target(by_key["utilization"]) is False
    assert on_target(by_key["overdue_tickets"]) is False
    assert on_target(by_key["mttr_s"]) is None
    assert previous_values(None) == {}
