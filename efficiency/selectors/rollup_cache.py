"""Page data built from the rollups, kept in Django's cache until the rollups change.

The usage pages sum hourly rollups that change only when a rollup run commits; most requests
ask again for what an earlier request already built. ``rollup_cached`` keeps such a value (the
numbers of a page part, or a chart's JSON) under a key made of:

* the rollup version of every cluster (``RollupVersion``), read in the same request: the
  transaction that writes a cluster's rollup rows raises its version, so once it has committed
  every key moves and the next request rebuilds from the new rows. A request that read the old
  version builds from rows at least as new as that version, so no key ever holds rows older
  than the version it names;
* who reads: "all" for those who see every department, else the ids of the departments the
  user heads (a head never gets what was built for another scope);
* the active language and display time zone (chart titles and times are translated and local);
* the current hour (charts leave out the hour still under way) and the caller's own arguments
  (the range, the department, the cluster …).

Only values computed from the rollups and from the arguments belong here: names, states and
anything else a person or a collector edits between rollup runs are read per request.
Entries expire after ``CACHE_SECONDS`` in any case. The cache is Django's default (per process
unless ``CACHES`` names a shared one); the version lives in the database, so every process
sees a commit at once either way.
"""

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from django.utils import timezone, translation

from efficiency.models import RollupVersion
from efficiency.scoping import User, sees_all_departments, visible_department_ids

T = TypeVar("T")

CACHE_SECONDS = 3600
KEY_PREFIX = "rollup-pages:1"
_MISSING = object()


def rollup_versions() -> str:
    """Every cluster's rollup version, as one string ("1:40,2:7"; "" before any rollup run)."""
    rows = RollupVersion.objects.order_by("cluster_id").values_list("cluster_id", "version")
    return ",".join(f"{cluster_id}:{version}" for cluster_id, version in rows)


def reader_scope(user: User) -> str:
    """What the user may see, as part of a key: "all", or the ids of the departments they head."""
    if sees_all_departments(user):
        return "all"
    return "departments:" + ",".join(map(str, sorted(visible_department_ids(user) or [])))


def rollup_cache_key(name: str, *, user: User, parts: tuple) -> str:
    this_hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    text = repr(
        (
            name,
            rollup_versions(),
            reader_scope(user),
            translation.get_language(),
            timezone.get_current_timezone_name(),
            this_hour.isoformat(),
            parts,
        )
    )
    return f"{KEY_PREFIX}:{name}:{hashlib.sha256(text.encode()).hexdigest()}"


def rollup_cached(name: str, build: Callable[[], T], *, user: User, parts: tuple) -> T:
    """``build()``'s value, from the cache when this key was built before (see the module).

    ``parts`` must name everything ``build`` depends on besides the rollups, the reader's scope,
    the language, the time zone and the hour: primitive values (ids, datetimes, strings)."""
    key = rollup_cache_key(name, user=user, parts=parts)
    value = cache.get(key, _MISSING)
    if value is _MISSING:
        value = build()
        cache.set(key, value, CACHE_SECONDS)
    return value
