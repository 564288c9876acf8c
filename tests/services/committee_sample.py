"""A schema-1 review pack content for tests: any departments, numbers that add up.

``sample_content(departments)`` takes ``[(code, name), ...]`` (or a count) and returns the dict
A's pack builder would produce (see notes/common.md): every hour the four cluster states add up
to the capacity, each department's within + unused guarantee = guarantee, and the totals are the
sums of the hours. ``store_pack(content, cluster=...)`` seals it into a ``ReviewPack``.
"""

from datetime import UTC, datetime, timedelta

HOURS = 24
START = datetime(2026, 11, 16, tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _r(value: float) -> float:
    return round(value, 3)


def sample_departments(count: int) -> list[tuple[str, str]]:
    return [(f"dept{n:03d}", f"Department {n}") for n in range(count)]


def sample_content(departments=9, *, hours: int = HOURS, rates: dict | None = None) -> dict:
    if isinstance(departments, int):
        departments = sample_departments(departments)
    hour_list = [_iso(START + timedelta(hours=h)) for h in range(hours)]
    dept_entries = []
    per_hour_alloc = [0.0] * hours
    per_hour_busy = [0.0] * hours
    for index, (code, name) in enumerate(departments):
        guarantee_gpus = 8 + (index % 4) * 8
        guarantee = [float(guarantee_gpus if h < hours // 2 else guarantee_gpus + 8) for h in range(hours)]
        within = [_r(g * (0.4 + 0.05 * ((index + h) % 10))) for h, g in enumerate(guarantee)]
        unused = [_r(g - w) for g, w in zip(guarantee, within, strict=True)]
        borrowed = [float((index + h) % 3) for h in range(hours)]
        allocated = [w + b for w, b in zip(within, borrowed, strict=True)]
        busy = [_r(a * 0.7) for a in allocated]
        for h in range(hours):
            per_hour_alloc[h] += allocated[h]
            per_hour_busy[h] += busy[h]
        alloc_total, busy_total = sum(allocated), sum(busy)
        dept_entries.append(
            {
                "id": index + 1,
                "code": code,
                "name": name,
                "hours": hour_list,
                "guarantee": guarantee,
                "within": within,
                "borrowed": borrowed,
                "unused_guarantee": unused,
                "totals": {
                    "allocated_gpu_hours": _r(alloc_total),
                    "busy_gpu_hours": _r(busy_total),
                    "utilization": round(busy_total / alloc_total, 6) if alloc_total else None,
                    "allocation_rate": round(sum(within) / sum(guarantee), 6),
                    "guaranteed_gpu_hours": _r(sum(guarantee)),
                    "within_gpu_hours": _r(sum(within)),
                    "borrowed_gpu_hours": _r(sum(borrowed)),
                    "lent_gpu_hours": 0.0,
                    "unused_guarantee_gpu_hours": _r(sum(unused)),
                    "idle_gpu_hours": _r(alloc_total - busy_total),
                },
            }
        )
    capacity_per_hour = float(int(max(per_hour_alloc, default=0) * 1.3) + 16)
    down = [4.0 if h % 6 == 0 else 0.0 for h in range(hours)]
    busy_h = [_r(v) for v in per_hour_busy]
    idle_h = [_r(a - b) for a, b in zip(per_hour_alloc, per_hour_busy, strict=True)]
    unalloc_h = [_r(capacity_per_hour - a - d) for a, d in zip(per_hour_alloc, down, strict=True)]
    totals = {
        "capacity_gpu_hours": _r(capacity_per_hour * hours),
        "busy": _r(sum(busy_h)),
        "allocated_idle": _r(sum(idle_h)),
        "unallocated": _r(sum(unalloc_h)),
        "down": _r(sum(down)),
    }
    totals["utilization"] = round(totals["busy"] / (totals["busy"] + totals["allocated_idle"]), 6)
    totals["allocation_rate"] = round(
        (totals["busy"] + totals["allocated_idle"]) / (totals["capacity_gpu_hours"] - totals["down"]), 6
    )
    pareto = sorted(
        [
            {"department": d["code"], "cause": cause, "gpu_hours": d["totals"][key]}
            for d in dept_entries
            for cause, key in (
                ("unused_guarantee", "unused_guarantee_gpu_hours"),
                ("allocated_idle", "idle_gpu_hours"),
            )
        ],
        key=lambda row: (-row["gpu_hours"], row["department"], row["cause"]),
    )
    rates = rates if rates is not None else {"H100": "12.50"}
    showback_rows = []
    total_cost = 0.0
    for d in dept_entries:
        charged = _r(d["totals"]["guaranteed_gpu_hours"] + d["totals"]["borrowed_gpu_hours"])
        cost = round(charged * 12.5, 2)
        total_cost += cost
        showback_rows.append(
            {
                "code": d["code"],
                "name": d["name"],
                "guaranteed_gpu_hours": d["totals"]["guaranteed_gpu_hours"],
                "borrowed_gpu_hours": d["totals"]["borrowed_gpu_hours"],
                "charged_gpu_hours": charged,
                "cost": cost,
                "busy_gpu_hours": d["totals"]["busy_gpu_hours"],
                "cost_per_effective_gpu_hour": round(cost / d["totals"]["busy_gpu_hours"], 4),
                "by_model": [
                    {"gpu_model": "H100", "charged_gpu_hours": charged, "rate": "12.50", "cost": cost}
                ],
            }
        )
    central_cost = round((totals["unallocated"] + totals["down"]) * 12.5, 2)
    codes = [d["code"] for d in dept_entries]
    return {
        "schema": 1,
        "definitions_version": "2026-12.1",
        "cluster": {"slug": "main", "name": "Main cluster"},
        "period": {
            "start": hour_list[0],
            "end": _iso(START + timedelta(hours=hours)),
            "time_zone": "Asia/Shanghai",
            "hours": hours,
        },
        "previous": None,
        "generated_at": _iso(START + timedelta(hours=hours, minutes=5)),
        "completeness": [
            {
                "source": "prometheus",
                "kind": "prometheus",
                "watermark": _iso(START + timedelta(hours=hours)),
                "coverage": 0.995,
                "complete": True,
            },
            {"source": "slurm", "kind": "slurm", "watermark": None, "coverage": None, "complete": False},
        ],
        "committee": ["chair (Chair Person)", "member (Member One)"],
        "summary": {
            "kpis": [
                {
                    "key": "utilization",
                    "value": totals["utilization"],
                    "previous": 0.61,
                    "target": 0.75,
                    "unit": "ratio",
                    "better": "higher",
                },
                {
                    "key": "allocation_rate",
                    "value": totals["allocation_rate"],
                    "previous": None,
                    "target": 0.9,
                    "unit": "ratio",
                    "better": "higher",
                },
                {
                    "key": "idle_gpu_hours",
                    "value": totals["allocated_idle"],
                    "previous": None,
                    "target": None,
                    "unit": "gpu_hours",
                    "better": "lower",
                },
                {
                    "key": "mttr_s",
                    "value": 5400.0,
                    "previous": 7200.0,
                    "target": 3600.0,
                    "unit": "seconds",
                    "better": "lower",
                },
                {
                    "key": "ettr",
                    "value": 0.93,
                    "previous": None,
                    "target": 0.95,
                    "unit": "ratio",
                    "better": "higher",
                },
                {
                    "key": "overdue_tickets",
                    "value": 2,
                    "previous": 3,
                    "target": 0,
                    "unit": "count",
                    "better": "lower",
                },
            ],
            "decisions_requested": [
                {"kind": "quota", "ref": 7, "title_key": "approve_quota_cycle", "params": {"cycle_id": 7}}
            ],
        },
        "since_last": {"decisions": [], "actions_open": [], "quota_changes": []},
        "cluster_section": {
            "capacity_waterfall": [
                {"key": "capacity", "gpu_hours": totals["capacity_gpu_hours"]},
                {"key": "down", "gpu_hours": totals["down"]},
                {"key": "unallocated", "gpu_hours": totals["unallocated"]},
                {"key": "allocated_idle", "gpu_hours": totals["allocated_idle"]},
                {"key": "busy", "gpu_hours": totals["busy"]},
            ],
            "states": {
                "hours": hour_list,
                "busy": busy_h,
                "allocated_idle": idle_h,
                "unallocated": unalloc_h,
                "down": down,
            },
            "totals": totals,
            "heatmap": {
                "rows": [f"gpu-{n:02d}" for n in range(6)],
                "columns": hour_list[::4],
                "values": [
                    [
                        None if (r + c) % 7 == 0 else round(((r * 3 + c) % 10) / 10, 6)
                        for c in range(len(hour_list[::4]))
                    ]
                    for r in range(6)
                ],
                "row_block": 1,
                "column_hours": 4,
            },
            "node_classes": [
                {"class": "idle", "nodes": 2, "gpus": 16},
                {"class": "hot", "nodes": 3, "gpus": 24},
                {"class": "steady", "nodes": 1, "gpus": 8},
            ],
        },
        "departments": dept_entries,
        "pareto_idle": pareto,
        "proposals": {
            "available": True,
            "cycle_id": 7,
            "status": "proposed",
            "rows": [
                {
                    "department": c,
                    "gpu_model": "H100",
                    "current": 8,
                    "proposed": 16,
                    "explanation": ["p90 demand 15.2", "rounded up to 16"],
                }
                for c in codes
            ],
            "backtest": None,
            "objections": [{"department": codes[0], "text": "Too few GPUs.", "response": ""}]
            if codes
            else [],
        },
        "capacity": {
            "available": True,
            "models": [
                {
                    "gpu_model": "H100",
                    "capacity_gpus": int(capacity_per_hour),
                    "demand_peak": int(max(per_hour_alloc, default=0)),
                    "unmet_gpu_hours": 12.0,
                    "forecast": [],
                }
            ],
            "alerts": [
                {"gpu_model": "H100", "kind": "shortfall", "gpus_needed": 16, "raised_at": hour_list[-1]}
            ],
        },
        "reliability": {
            "incidents": [
                {
                    "id": 1,
                    "category": "hardware_gpu",
                    "severity": "critical",
                    "node": "gpu-01",
                    "occurred_at": hour_list[2 % hours],
                    "recovered_at": hour_list[4 % hours],
                    "lost_gpu_hours": 16.0,
                },
                {
                    "id": 2,
                    "category": "network_rdma",
                    "severity": "warning",
                    "node": "gpu-03",
                    "occurred_at": hour_list[8 % hours],
                    "recovered_at": None,
                    "lost_gpu_hours": 4.5,
                },
            ],
            "pareto": [
                {"category": "hardware_gpu", "count": 1, "lost_gpu_hours": 16.0},
                {"category": "network_rdma", "count": 1, "lost_gpu_hours": 4.5},
            ],
            "phases": {
                "detect": {"p50": 60.0, "p90": 120.0, "max": 300.0, "n": 2},
                "locate": {"p50": 600.0, "p90": 1200.0, "max": 1800.0, "n": 2},
                "restart": {"p50": 900.0, "p90": 1500.0, "max": 2000.0, "n": 1},
                "recover": {"p50": 3600.0, "p90": 5400.0, "max": 7200.0, "n": 1},
            },
            "mttr_s": 5400.0,
            "repeat_nodes": [{"node": "gpu-01", "incidents": 2}],
            "ettr": 0.93,
        },
        "recommendations": {
            "by_state": {"open": 4, "accepted": 2, "rejected": 1},
            "accepted": 2,
            "rejected": 1,
            "open": 4,
        },
        "tickets": {
            "by_state": {"open": 3, "in_progress": 2, "verified": 1},
            "open": 5,
            "overdue": 2,
            "ageing": [
                {"bucket": "0-7d", "count": 2},
                {"bucket": "8-14d", "count": 2},
                {"bucket": "15-30d", "count": 1},
                {"bucket": ">30d", "count": 0},
            ],
            "verified": [
                {
                    "id": 11,
                    "title": "Fix dataloader stalls",
                    "department": codes[0] if codes else "",
                    "expected_gain_pct": 20.0,
                    "measured_gain_pct": 18.5,
                }
            ],
        },
        "showback": {
            "rate_card": {"version": 1, "currency": "CNY", "rates": rates, "default_rate": ""},
            "departments": showback_rows,
            "central": {
                "unallocated_idle_gpu_hours": totals["unallocated"],
                "down_gpu_hours": totals["down"],
                "cost": central_cost,
            },
            "total_cost": round(total_cost + central_cost, 2),
            "unpriced_models": [],
        },
    }


def store_pack(content: dict, *, cluster, version: int = 1, generated_by=None):
    """Seal ``content`` into a ReviewPack of ``cluster``."""
    from efficiency.analysis.committee.seal import seal
    from efficiency.models import ReviewPack

    text, digest = seal(content)
    return ReviewPack.objects.create(
        cluster=cluster,
        period_start=datetime.fromisoformat(content["period"]["start"]),
        period_end=datetime.fromisoformat(content["period"]["end"]),
        version=version,
        definitions_version=content["definitions_version"],
        time_zone=content["period"]["time_zone"],
        content_json=text,
        content_hash=digest,
        generated_at=datetime.fromisoformat(content["generated_at"]),
        generated_by=generated_by,
    )
