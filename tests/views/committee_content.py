# ruff: noqa: E501
"""A schema-1 review pack content dict for tests of the pack pages, with numbers that add up.

``pack_content(departments)`` follows the pack schema of issue 18 exactly: every hour's GPU-hours
by state add up to the capacity, each department's within + unused guarantee equals its guarantee,
and the totals are the sums of the hourly series.
"""

from datetime import UTC, datetime, timedelta

CAPACITY_GPUS = 64  # enough for every department's peak (guarantee + 4) in tests


def _r(value: float, digits: int = 3) -> float:
    return round(value, digits)


def _share(index: int) -> float:
    """The busy share of the GPUs department number ``index`` holds."""
    return 0.7 - 0.15 * (index % 4)


def pack_content(
    departments: list[tuple[str, str, int]] | None = None,
    *,
    start: datetime = datetime(2026, 11, 16, 16, tzinfo=UTC),
    hours: int = 48,
    previous: dict | None = None,
    unavailable: tuple[str, ...] = (),
) -> dict:
    """Content for ``departments`` [(code, name, guaranteed GPUs)] over ``hours`` hours.

    ``unavailable`` names top-level sections to mark ``{"available": false, "reason": ...}``.
    """
    departments = departments or [("vision", "Vehicle vision", 24), ("radar", "Radar perception", 16)]
    stamps = [(start + timedelta(hours=h)).isoformat().replace("+00:00", "Z") for h in range(hours)]
    end = (start + timedelta(hours=hours)).isoformat().replace("+00:00", "Z")
    busy, idle, unallocated, down = [], [], [], []
    dept_entries = []
    dept_series = {}
    for index, (code, _name, guarantee) in enumerate(departments):
        within, borrowed, unused = [], [], []
        for h in range(hours):
            used = max(0, guarantee - 4 + (h + 3 * index) % 9)  # 0..guarantee+4 GPUs
            within.append(float(min(used, guarantee)))
            borrowed.append(float(max(0, used - guarantee)))
            unused.append(float(max(0, guarantee - used)))
        dept_series[code] = (within, borrowed, unused, guarantee)
    for h in range(hours):
        allocated = sum(s[0][h] + s[1][h] for s in dept_series.values())
        dn = 8.0 if 10 <= h < 14 else 0.0
        # Every department's busy share of what it holds (see below): the cluster's busy is their sum.
        b = _r(sum(_share(i) * (s[0][h] + s[1][h]) for i, s in enumerate(dept_series.values())))
        busy.append(b)
        idle.append(_r(allocated - b))
        unallocated.append(_r(CAPACITY_GPUS - dn - allocated))
        down.append(dn)
    totals_state = {
        "busy": _r(sum(busy)),
        "allocated_idle": _r(sum(idle)),
        "unallocated": _r(sum(unallocated)),
        "down": _r(sum(down)),
    }
    capacity = float(CAPACITY_GPUS * hours)
    pareto = []
    showback = []
    for code, name, guarantee in departments:
        within, borrowed, unused, _g = dept_series[code]
        allocated = sum(within) + sum(borrowed)
        dept_busy = _r(
            sum(_share(len(dept_entries)) * (w + b) for w, b in zip(within, borrowed, strict=True))
        )
        totals = {
            "allocated_gpu_hours": _r(allocated),
            "busy_gpu_hours": dept_busy,
            "utilization": _r(dept_busy / allocated, 6) if allocated else None,
            "allocation_rate": _r(allocated / (guarantee * hours), 6),
            "guaranteed_gpu_hours": float(guarantee * hours),
            "within_gpu_hours": _r(sum(within)),
            "borrowed_gpu_hours": _r(sum(borrowed)),
            "lent_gpu_hours": _r(sum(unused)),
            "unused_guarantee_gpu_hours": _r(sum(unused)),
            "idle_gpu_hours": _r(allocated - dept_busy),
        }
        dept_entries.append(
            {
                "id": len(dept_entries) + 1,
                "code": code,
                "name": name,
                "hours": stamps,
                "guarantee": [float(guarantee)] * hours,
                "within": within,
                "borrowed": borrowed,
                "unused_guarantee": unused,
                "totals": totals,
            }
        )
        pareto.append(
            {"department": code, "cause": "unused_guarantee", "gpu_hours": totals["lent_gpu_hours"]}
        )
        pareto.append({"department": code, "cause": "allocated_idle", "gpu_hours": totals["idle_gpu_hours"]})
        charged = _r(totals["guaranteed_gpu_hours"] + totals["borrowed_gpu_hours"])
        showback.append(
            {
                "code": code,
                "name": name,
                "guaranteed_gpu_hours": totals["guaranteed_gpu_hours"],
                "borrowed_gpu_hours": totals["borrowed_gpu_hours"],
                "charged_gpu_hours": charged,
                "cost": _r(charged * 12.5, 2),
                "busy_gpu_hours": dept_busy,
                "cost_per_effective_gpu_hour": _r(charged * 12.5 / dept_busy, 4) if dept_busy else None,
                "by_model": [
                    {"gpu_model": "NVIDIA A100-SXM4-80GB", "charged_gpu_hours": charged, "rate": "12.50",
                     "cost": _r(charged * 12.5, 2)}
                ],
            }
        )  # fmt: skip
    pareto.sort(key=lambda row: -row["gpu_hours"])
    first = departments[0][0]
    content = {
        "schema": 1,
        "definitions_version": "2026-12.1",
        "cluster": {"slug": "main", "name": "Main cluster"},
        "period": {"start": stamps[0], "end": end, "time_zone": "Asia/Shanghai", "hours": hours},
        "previous": previous,
        "generated_at": end,
        "completeness": [
            {"source": "prometheus", "kind": "prometheus", "watermark": end, "coverage": 1.0, "complete": True},
            {"source": "slurm", "kind": "slurm", "watermark": stamps[-2], "coverage": 0.98, "complete": False},
        ],
        "committee": ["chair (Committee Chair)", "member (Committee Member)"],
        "summary": {
            "kpis": [
                {"key": "utilization", "value": _r(totals_state["busy"] / capacity, 6), "previous": 0.61,
                 "target": 0.7, "unit": "ratio", "better": "higher"},
                {"key": "allocation_rate", "value": _r((totals_state["busy"] + totals_state["allocated_idle"])
                 / capacity, 6), "previous": 0.8, "target": 0.85, "unit": "ratio", "better": "higher"},
                {"key": "idle_gpu_hours", "value": totals_state["allocated_idle"], "previous": 500.0,
                 "target": None, "unit": "gpu_hours", "better": "lower"},
                {"key": "mttr_s", "value": 5400.0, "previous": 7200.0, "target": 3600.0, "unit": "seconds",
                 "better": "lower"},
                {"key": "ettr", "value": 0.93, "previous": 0.9, "target": 0.95, "unit": "ratio", "better": "higher"},
                {"key": "overdue_tickets", "value": 2, "previous": 3, "target": 0, "unit": "count",
                 "better": "lower"},
            ],
            "decisions_requested": [
                {"kind": "quota", "ref": 7, "title_key": "approve_quota_cycle", "params": {"cycle_id": 7}}
            ],
        },
        "since_last": {
            "decisions": [
                {"id": 1, "meeting_id": 1, "number": 1, "title": "Approve quota cycle 6", "kind": "quota",
                 "decided_at": stamps[0], "effect": {"utilization_delta": 0.04}}
            ],
            "actions_open": [
                {"id": 3, "title": "Fix the checkpoint interval", "owner": "ops", "due_on": "2026-11-20",
                 "carried": 2, "overdue": True}
            ],
            "quota_changes": [
                {"cycle_id": 6, "at": stamps[0], "department": first, "gpu_model": "NVIDIA A100-SXM4-80GB",
                 "from": 20, "to": departments[0][2], "kind": "approved"}
            ],
        },
        "cluster_section": {
            "capacity_waterfall": [
                {"key": "capacity", "gpu_hours": capacity},
                {"key": "down", "gpu_hours": totals_state["down"]},
                {"key": "unallocated", "gpu_hours": totals_state["unallocated"]},
                {"key": "allocated_idle", "gpu_hours": totals_state["allocated_idle"]},
                {"key": "busy", "gpu_hours": totals_state["busy"]},
            ],
            "states": {"hours": stamps, "busy": busy, "allocated_idle": idle, "unallocated": unallocated,
                       "down": down},
            "totals": {"capacity_gpu_hours": capacity, **totals_state,
                       "utilization": _r(totals_state["busy"] / capacity, 6),
                       "allocation_rate": _r((totals_state["busy"] + totals_state["allocated_idle"]) / capacity, 6)},
            "heatmap": {
                "rows": ["gpu-n01", "gpu-n02", "gpu-n03", "gpu-n04"],
                "columns": stamps[::6],
                "values": [[_r(((r + c) % 7) / 7, 6) if (r, c) != (3, 1) else None
                            for c in range(len(stamps[::6]))] for r in range(4)],
                "row_block": 1,
                "column_hours": 6,
            },
            "node_classes": [
                {"class": "idle", "nodes": 1, "gpus": 8},
                {"class": "hot", "nodes": 3, "gpus": 24},
                {"class": "fluctuating", "nodes": 2, "gpus": 16},
                {"class": "steady", "nodes": 2, "gpus": 16},
            ],
        },
        "departments": dept_entries,
        "pareto_idle": pareto,
        "proposals": {
            "available": True, "cycle_id": 7, "status": "proposed",
            "rows": [{"department": code, "gpu_model": "NVIDIA A100-SXM4-80GB", "current": g, "proposed": g + 2,
                      "explanation": [f"Percentile: P75 of hourly demand is {g + 2} GPUs"]}
                     for code, _n, g in departments],
            "backtest": None,
            "objections": [{"department": departments[-1][0], "text": "We need more for the deadline.",
                            "response": ""}],
        },
        "capacity": {
            "available": True,
            "models": [{"gpu_model": "NVIDIA A100-SXM4-80GB", "capacity_gpus": CAPACITY_GPUS, "demand_peak": 70,
                        "unmet_gpu_hours": 42.0, "forecast": [66, 68, 71]}],
            "alerts": [{"gpu_model": "NVIDIA A100-SXM4-80GB", "kind": "scale_out", "gpus_needed": 8,
                        "raised_at": stamps[5]}],
        },
        "reliability": {
            "incidents": [
                {"id": 11, "category": "hardware_gpu", "severity": "critical", "node": "gpu-n02",
                 "occurred_at": stamps[10], "recovered_at": stamps[12], "lost_gpu_hours": 16.0},
                {"id": 12, "category": "network", "severity": "major", "node": "gpu-n03",
                 "occurred_at": stamps[20], "recovered_at": stamps[21], "lost_gpu_hours": 8.0},
            ],
            "pareto": [{"category": "hardware_gpu", "count": 1, "lost_gpu_hours": 16.0},
                       {"category": "network", "count": 1, "lost_gpu_hours": 8.0}],
            "phases": {
                "detect": {"p50": 60.0, "p90": 180.0, "max": 300.0, "n": 2},
                "locate": {"p50": 600.0, "p90": 1500.0, "max": 1800.0, "n": 2},
                "restart": {"p50": 900.0, "p90": 1200.0, "max": 1300.0, "n": 2},
                "recover": {"p50": 3600.0, "p90": 6000.0, "max": 7200.0, "n": 2},
            },
            "mttr_s": 5400.0,
            "repeat_nodes": [{"node": "gpu-n02", "incidents": 3}],
            "ettr": 0.93,
        },
        "recommendations": {"by_state": {"proposed": 4, "accepted": 3, "rejected": 1}, "accepted": 3,
                            "rejected": 1, "open": 4},
        "tickets": {
            "by_state": {"new": 2, "in_progress": 3, "resolved": 1},
            "open": 5, "overdue": 2,
            "ageing": [{"bucket": "0-7d", "count": 2}, {"bucket": "8-14d", "count": 2},
                       {"bucket": "15-30d", "count": 1}, {"bucket": ">30d", "count": 0}],
            "verified": [{"id": 5, "title": "Larger batch size", "department": first,
                          "expected_gain_pct": 20.0, "measured_gain_pct": 14.5}],
        },
        "showback": {
            "rate_card": {"version": 1, "currency": "CNY", "rates": {"NVIDIA A100-SXM4-80GB": "12.50"},
                          "default_rate": "10.00"},
            "departments": showback,
            "central": {"unallocated_idle_gpu_hours": totals_state["unallocated"],
                        "down_gpu_hours": totals_state["down"],
                        "cost": _r((totals_state["unallocated"] + totals_state["down"]) * 12.5, 2)},
            "total_cost": _r(sum(row["cost"] for row in showback)
                             + (totals_state["unallocated"] + totals_state["down"]) * 12.5, 2),
            "unpriced_models": [],
        },
    }  # fmt: skip
    for key in unavailable:
        content[key] = {"available": False, "reason": "no data for this area yet"}
    return content
