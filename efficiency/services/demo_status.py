"""How far the demo's first history fill has come, shared between processes through a file.

``manage.py runportal --demo`` serves pages while ``simulate backfill`` feeds weeks of history
through the collectors; the backfill writes its phase here and every page shows a notice until
it is done. Outside the demo the file never exists and nothing is shown.
"""

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone

# Phases in the order the backfill runs them, each with its share of the usual run time.
PHASES = {"jobs": 0.05, "samples": 0.35, "logs": 0.35, "rollups": 0.15, "quotas": 0.10}


@dataclass(frozen=True)
class HistoryStatus:
    phase: str  # one of PHASES, or "done"
    fraction: float  # 0..1 of the whole backfill
    started_at: datetime
    updated_at: datetime

    @property
    def preparing(self) -> bool:
        return self.phase != "done"

    @property
    def percent(self) -> int:
        return int(self.fraction * 100)


def _path() -> Path:
    return Path(settings.VAR_DIR) / "sim" / "history.json"


def history_status_write(*, phase: str, phase_fraction: float = 0.0, started_at: datetime) -> None:
    """Record that the backfill is in ``phase``, ``phase_fraction`` of the way through it."""
    done = 0.0
    for name, share in PHASES.items():
        if name == phase:
            done += share * min(1.0, max(0.0, phase_fraction))
            break
        done += share
    else:
        done = 1.0
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(
        json.dumps(
            {
                "phase": phase,
                "fraction": round(done, 3),
                "started_at": started_at.isoformat(),
                "updated_at": timezone.now().isoformat(),
            }
        )
    )
    os.replace(partial, path)  # readers never see half a file


def history_status() -> HistoryStatus | None:
    """The backfill's last recorded status; None when there is no demo history fill."""
    try:
        data = json.loads(_path().read_text())
        return HistoryStatus(
            phase=data["phase"],
            fraction=float(data["fraction"]),
            started_at=datetime.fromisoformat(data["started_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
        )
    except (OSError, ValueError, KeyError):
        return None
