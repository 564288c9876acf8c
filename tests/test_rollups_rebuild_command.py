"""``manage.py rollups_rebuild`` recomputes the rollups of a range and says what it did."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command

from efficiency.collectors.records import GpuReading
from efficiency.models import NodeHour, RollupDirtyHour
from efficiency.services.ingest import gpu_readings_ingest
from tests.factories import NodeFactory

NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
# Two hours of raw samples: 17 Nov 02:00 UTC (10:00 in Shanghai) and 18 Nov 02:00 UTC.
HOURS = [datetime(2026, 11, 17, 2, tzinfo=UTC), datetime(2026, 11, 18, 2, tzinfo=UTC)]


def rebuild(*args) -> str:
    out = StringIO()
    call_command("rollups_rebuild", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def sampled(db):
    node = NodeFactory(hostname="gpu-r01")
    readings = [
        GpuReading(
            "gpu-r01", gpu, int((hour + timedelta(minutes=m)).timestamp() * 1000), gr_engine_active_pct=50.0
        )
        for hour in HOURS
        for m in range(0, 60, 10)
        for gpu in range(8)
    ]
    with time_machine.travel(NOW, tick=False):
        gpu_readings_ingest(cluster=node.cluster, readings=readings, interval_s=600, now=NOW)
        RollupDirtyHour.objects.all().delete()  # as if ingest's marks were long done
        yield node


def test_a_range_rebuilds_only_its_hours_and_says_so(sampled):
    text = rebuild("--start", "2026-11-18", "--end", "2026-11-18")
    assert "Range: 2026-11-18 00:00 – 2026-11-19 00:00 (Asia/Shanghai)" in text
    assert f"{sampled.cluster.slug}: 1 hours queued (2026-11-18 10:00 – 2026-11-18 10:00)" in text
    assert "1 hours recomputed" in text
    # Scope rows: the cluster's and the owning department's.
    assert "Rollup rows in the range now: 1 node-hours, 2 scope-hours, 1 node-days" in text
    assert list(NodeHour.objects.values_list("hour", flat=True)) == [HOURS[1]]


def test_without_a_range_every_hour_with_data_is_rebuilt(sampled):
    text = rebuild()
    assert "Range: every hour with data" in text
    assert "2 hours recomputed" in text
    assert NodeHour.objects.count() == 2


def test_a_range_without_data_and_bad_arguments_say_so(sampled):
    assert "no samples or rollups in the range, nothing to do" in rebuild(
        "--start", "2026-10-01", "--end", "2026-10-02"
    )
    with pytest.raises(CommandError, match="--end 2026-10-01 is before --start 2026-10-02"):
        rebuild("--start", "2026-10-02", "--end", "2026-10-01")
    with pytest.raises(CommandError, match="No cluster 'nope'"):
        rebuild("--cluster", "nope")
