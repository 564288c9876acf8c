"""A rollup stopped at any point, the way a kill stops it, then run again: the rollups are those
of an uninterrupted run, whatever the number of hours and wherever it stopped.

In-process companion of ``test_worker_killed_in_rollup.py`` (which kills a real worker at one
point): the stop is an exception no handler catches (a ``BaseException``, as nothing runs after
SIGKILL), raised while a batch is being written; the transaction rolls back as PostgreSQL does
for a connection that dies.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.collectors.records import GpuReading
from efficiency.models import NodeHour, RollupDirtyHour
from efficiency.services import rollups
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from tests.factories import ClusterFactory, NodeFactory

NOW = datetime.now(tz=UTC).replace(minute=0, second=0, microsecond=0)


class Killed(BaseException):
    """Stands for SIGKILL: no ``except Exception`` sees it."""


def _rows() -> dict:
    return {
        row["hour"]: row
        for row in NodeHour.objects.values(
            "hour", "sample_count", "sampled_gpu_s", "busy_gpu_s", "available_gpu_s"
        )
    }


@pytest.mark.django_db(transaction=False)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hours=st.integers(1, 3 * rollups.HOURS_PER_BATCH), stop_at=st.integers(1, 3), data=st.data())
def test_a_rollup_stopped_anywhere_and_run_again_equals_an_uninterrupted_one(
    monkeypatch, hours, stop_at, data
):
    batches = -(-hours // rollups.HOURS_PER_BATCH)
    stop_at = min(stop_at, batches)
    late = data.draw(st.booleans(), label="hours rolled up before, then late data")
    sid = transaction.savepoint()
    try:
        cluster = ClusterFactory(slug="interrupted")
        NodeFactory(cluster=cluster, hostname="gpu-i01", gpu_count=1)
        start = NOW - timedelta(hours=hours + 1)

        def ingest(minutes):
            readings = [
                GpuReading(
                    hostname="gpu-i01",
                    gpu_index=0,
                    timestamp_ms=int((start + timedelta(hours=h, minutes=m)).timestamp() * 1000),
                    gr_engine_active_pct=float((h * 7 + m) % 101),
                )
                for h in range(hours)
                for m in minutes
            ]
            gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=900, now=NOW)

        if late:
            ingest((0, 15))
            rollups.rollups_refresh(now=NOW)
            ingest((30, 45))
        else:
            ingest((0, 15, 30, 45))

        calls = {"n": 0}
        refresh_days = rollups._node_days_refresh

        def stopping(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == stop_at:
                raise Killed
            return refresh_days(*args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(rollups, "_node_days_refresh", stopping)
            with pytest.raises(Killed):
                rollups.rollups_refresh(now=NOW)
        rollups.rollups_refresh(now=NOW)  # the next run (beat: a minute later)
        recovered = _rows()
        assert RollupDirtyHour.objects.count() == 0
        assert len(recovered) == hours
        assert all(row["sample_count"] == 4 for row in recovered.values())

        dirty_hours_mark(cluster=cluster, hours=list(recovered), now=NOW)
        rollups.rollups_refresh(now=NOW)
        assert _rows() == recovered
    finally:
        transaction.savepoint_rollback(sid)
