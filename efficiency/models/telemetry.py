"""Data sources with their watermarks, raw GPU samples and log chunks, and hourly rollups."""

from datetime import datetime

from django.db import models
from django.utils.translation import gettext_lazy as _

from efficiency.choices import NodeClass, RunStatus, SourceKind
from efficiency.models.inventory import Cluster, Department, Node
from efficiency.models.jobs import Job


class DataSource(models.Model):
    """A configured source for one cluster, with its watermark and health.

    ``watermark``: data is complete up to this time; after an outage the collector asks the
    source for [watermark, now) and so backfills the gap. ``state`` holds collector cursors
    (log file offsets). ``config`` is the kind's settings (URLs, paths, PromQL, auth header).
    """

    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="sources"
    )
    kind = models.CharField(_("kind"), max_length=20, choices=SourceKind.choices)
    name = models.CharField(_("name"), max_length=100)
    config = models.JSONField(_("configuration"), default=dict, blank=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    interval_s = models.PositiveIntegerField(
        _("interval (s)"), default=60, help_text=_("How often to collect, and the sample step.")
    )
    watermark = models.DateTimeField(_("complete up to"), null=True, blank=True)
    state = models.JSONField(_("collector state"), default=dict, blank=True)
    running_since = models.DateTimeField(_("running since"), null=True, blank=True)
    last_attempt_at = models.DateTimeField(_("last attempt"), null=True, blank=True)
    last_success_at = models.DateTimeField(_("last success"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True)
    last_error_at = models.DateTimeField(_("last error at"), null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(_("consecutive failures"), default=0)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        ordering = ["cluster", "name"]
        verbose_name = _("data source")
        verbose_name_plural = _("data sources")
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="source_unique_name")]

    def __str__(self) -> str:
        return f"{self.cluster.slug}/{self.name}"


class SourceRun(models.Model):
    """One collection run of a source: what came in, what was stored, what was rejected and why."""

    source = models.ForeignKey(
        DataSource, verbose_name=_("source"), on_delete=models.CASCADE, related_name="runs"
    )
    started_at = models.DateTimeField(_("started at"))
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    status = models.CharField(
        _("status"), max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING
    )
    window_start = models.DateTimeField(_("window start"), null=True, blank=True)
    window_end = models.DateTimeField(_("window end"), null=True, blank=True)
    received = models.PositiveIntegerField(_("received"), default=0)
    stored = models.PositiveIntegerField(_("stored"), default=0)
    duplicates = models.PositiveIntegerField(_("duplicates"), default=0)
    rejected = models.PositiveIntegerField(_("rejected"), default=0)
    message = models.TextField(_("message"), blank=True)
    rejects = models.JSONField(_("rejected input (first ones)"), default=list, blank=True)

    class Meta:
        ordering = ["-started_at"]
        verbose_name = _("source run")
        verbose_name_plural = _("source runs")
        indexes = [models.Index(fields=["source", "-started_at"])]

    def __str__(self) -> str:
        return f"{self.source} @ {self.started_at:%Y-%m-%d %H:%M:%S}"


class GpuSample(models.Model):
    """Raw per-GPU metrics at one instant (kept for ``PORTAL_RAW_RETENTION_DAYS``).

    Partitioned by UTC day of ``ts`` on PostgreSQL (``services.partitions``).

    One wide row per GPU and scrape rather than one row per metric: a fifth of the rows and
    indexes. ``interval_s`` is how long the sample stands for (the source's step), so samples
    from sources with different steps add up to the right GPU-seconds.
    """

    pk = models.CompositePrimaryKey("node", "gpu_index", "ts")
    # No index of its own: the primary key (node, gpu_index, ts) leads with the node.
    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+"
    )
    gpu_index = models.PositiveSmallIntegerField()
    ts = models.DateTimeField()
    interval_s = models.PositiveIntegerField()
    util_pct = models.FloatField(null=True)
    gr_engine_active_pct = models.FloatField(null=True)
    sm_active_pct = models.FloatField(null=True)
    fb_used_mib = models.FloatField(null=True)
    power_w = models.FloatField(null=True)
    temp_c = models.FloatField(null=True)
    ecc_dbe_total = models.FloatField(null=True)
    xid_last = models.PositiveIntegerField(null=True)

    class Meta:
        verbose_name = _("GPU sample")
        verbose_name_plural = _("GPU samples")
        indexes = [models.Index(fields=["ts"], name="gpusample_ts")]

    def __str__(self) -> str:
        return f"node {self.node_id} gpu {self.gpu_index} @ {self.ts:%Y-%m-%d %H:%M:%S}"


class LogChunk(models.Model):
    """A run of complete log lines from one stream, identified by its byte offset.

    The same chunk delivered twice (a replayed cursor, a shipper's retry) has the same
    (source, stream, file_id, start_offset) and is stored once. Partitioned by UTC day of
    ``received_at`` on PostgreSQL (``services.partitions``).
    """

    source = models.ForeignKey(DataSource, on_delete=models.CASCADE, related_name="log_chunks")
    stream = models.CharField(max_length=500)
    file_id = models.CharField(max_length=100)
    start_offset = models.BigIntegerField()
    end_offset = models.BigIntegerField()
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="log_chunks")
    job_external_id = models.CharField(max_length=200, blank=True)
    node = models.CharField(max_length=255, blank=True)
    rank = models.IntegerField(null=True, blank=True)
    line_count = models.PositiveIntegerField()
    text = models.TextField()
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["stream", "file_id", "start_offset"]
        verbose_name = _("log chunk")
        verbose_name_plural = _("log chunks")
        # Stored once per (source, stream, file_id, start_offset): checked by ingest under a
        # per-source lock, not by a unique constraint, which a table partitioned by day could
        # only enforce within one day (migration 0029).
        indexes = [
            models.Index(fields=["job", "rank"]),
            models.Index(fields=["received_at"]),
            models.Index(fields=["source", "stream", "file_id", "start_offset"], name="logchunk_offset"),
        ]

    def __str__(self) -> str:
        return f"{self.stream}@{self.start_offset}"


class PrunedLogSpan(models.Model):
    """What retention removed from the head of one log file: up to which byte, and how many lines.

    Line numbers count from the start of the file, so once a file's first chunks are gone the
    chunks still stored are numbered after ``line_count`` lines, and a replay of a pruned part
    (a shipper's cursor reset) is known as already delivered rather than stored again.
    """

    source = models.ForeignKey(DataSource, on_delete=models.CASCADE, related_name="pruned_log_spans")
    stream = models.CharField(max_length=500)
    file_id = models.CharField(max_length=100)
    end_offset = models.BigIntegerField(help_text=_("Every byte before this offset was pruned."))
    line_count = models.PositiveBigIntegerField(help_text=_("Lines in the pruned chunks."))
    pruned_at = models.DateTimeField()

    class Meta:
        verbose_name = _("pruned log span")
        verbose_name_plural = _("pruned log spans")
        constraints = [
            models.UniqueConstraint(fields=["source", "stream", "file_id"], name="pruned_log_span_file"),
        ]

    def __str__(self) -> str:
        return f"{self.stream} <{self.end_offset}"


class RollupDirtyHour(models.Model):
    """An hour of a cluster whose rollups must be recomputed (new, late or corrected data)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    marked_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour"], name="dirtyhour_unique")]

    def __str__(self) -> str:
        return f"cluster {self.cluster_id} {self.hour:%Y-%m-%d %H:00}"


class RollupVersion(models.Model):
    """How many times a cluster's rollups have been rewritten.

    The transaction that writes a cluster's rollup rows adds one here before it commits, so a
    page built from the rollups can be kept in the cache under the versions it read and is
    rebuilt once any of them moves (``efficiency.selectors.rollup_cache``). Only ever raised with
    ``F("version") + 1``: a number is never used twice for different rows.
    """

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, primary_key=True, related_name="+")
    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"cluster {self.cluster_id} rollups v{self.version}"


class NodeHourQuerySet(models.QuerySet):
    def between(self, start: datetime, end: datetime) -> "NodeHourQuerySet":
        return self.filter(hour__gte=start, hour__lt=end)


class NodeHour(models.Model):
    """Per node and hour: capacity, allocation, sample coverage and activity (GPU-seconds).

    ``busy_gpu_s`` is the activity metric integrated over time: GR_ENGINE_ACTIVE where the
    exporter reports it, else GPU_UTIL (which reads 100% for a busy-waiting kernel).
    ``sampled_gpu_s`` says how much of ``available_gpu_s`` the samples cover: missing data is
    not 0% utilization.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField()
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    owner_department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    gpu_count = models.PositiveSmallIntegerField()
    available_gpu_s = models.FloatField()
    allocated_gpu_s = models.FloatField()
    sampled_gpu_s = models.FloatField()
    busy_gpu_s = models.FloatField()
    gpu_util_busy_gpu_s = models.FloatField()
    sm_active_busy_gpu_s = models.FloatField()
    fb_used_mib_avg = models.FloatField(null=True)
    power_w_avg = models.FloatField(null=True)
    temp_c_max = models.FloatField(null=True)
    sample_count = models.PositiveIntegerField()

    objects = NodeHourQuerySet.as_manager()

    class Meta:
        verbose_name = _("node hour")
        verbose_name_plural = _("node hours")
        constraints = [models.UniqueConstraint(fields=["node", "hour"], name="nodehour_unique")]
        indexes = [models.Index(fields=["hour"]), models.Index(fields=["owner_department", "hour"])]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.hour:%Y-%m-%d %H:00}"


class DepartmentHour(models.Model):
    """Per node, department and hour: GPU-seconds the department's jobs held, and how busy.

    Busy time of a node-hour is split between the departments holding its GPUs in proportion
    to what each held, and never more than what a department held.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="hours")
    allocated_gpu_s = models.FloatField()
    busy_gpu_s = models.FloatField()
    job_count = models.PositiveIntegerField()

    objects = NodeHourQuerySet.as_manager()

    class Meta:
        verbose_name = _("department hour")
        verbose_name_plural = _("department hours")
        constraints = [
            models.UniqueConstraint(fields=["node", "hour", "department"], name="departmenthour_unique")
        ]
        indexes = [models.Index(fields=["department", "hour"]), models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"department {self.department_id} node {self.node_id} {self.hour:%Y-%m-%d %H:00}"


class JobHour(models.Model):
    """Per job and hour: GPU-seconds the job held (over all its nodes), and how busy.

    Busy time is the job's share of its nodes' busy time (exact when it had a node to itself,
    which multi-GPU training jobs do); it drives job efficiency and idle allocations.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField()
    # The job's department, copied so that a department's jobs are found by index, not a join.
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    allocated_gpu_s = models.FloatField()
    busy_gpu_s = models.FloatField()
    # SM activity integrated the same way (0 where the exporter reports none).
    sm_active_busy_gpu_s = models.FloatField(default=0.0)

    class Meta:
        verbose_name = _("job hour")
        verbose_name_plural = _("job hours")
        constraints = [models.UniqueConstraint(fields=["job", "hour"], name="jobhour_unique")]
        indexes = [models.Index(fields=["hour"]), models.Index(fields=["department", "hour"])]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.hour:%Y-%m-%d %H:00}"


class NodeClassification(models.Model):
    """A node's class over one cycle (idle / hot / fluctuating / steady / unknown), with why.

    The cycle is whole portal days (efficiency.days) in ``day_zone``; rows of another zone than
    the current one are replaced where their cycle overlaps the next classification's.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="classifications")
    cycle_start = models.DateTimeField()
    cycle_end = models.DateTimeField()
    day_zone = models.CharField(max_length=64)  # IANA name; "UTC" for cycles cut before portal days
    node_class = models.CharField(max_length=20, choices=NodeClass.choices)
    covered_hours = models.PositiveIntegerField()
    mean_util_pct = models.FloatField(null=True)
    idle_hour_share = models.FloatField(null=True)
    hot_hour_share = models.FloatField(null=True)
    stddev_pct = models.FloatField(null=True)
    reason = models.CharField(max_length=40)
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["-cycle_end"]
        verbose_name = _("node classification")
        verbose_name_plural = _("node classifications")
        constraints = [
            models.UniqueConstraint(
                fields=["node", "cycle_start", "cycle_end"], name="nodeclass_unique_cycle"
            )
        ]
        indexes = [models.Index(fields=["cycle_end", "node_class"])]

    def __str__(self) -> str:
        return f"{self.node_id} {self.node_class} ({self.cycle_start:%Y-%m-%d}–{self.cycle_end:%Y-%m-%d})"


class ScopeHour(models.Model):
    """Per cluster and hour, the totals of a whole scope: the cluster (no department) or one
    department (capacity and coverage of the nodes it owns, use by its jobs).

    A rollup of NodeHour and DepartmentHour, so that cluster and department pages read a few
    rows an hour whatever the number of nodes.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    available_gpu_s = models.FloatField()
    allocated_gpu_s = models.FloatField()
    sampled_gpu_s = models.FloatField()
    busy_gpu_s = models.FloatField()

    objects = NodeHourQuerySet.as_manager()

    class Meta:
        verbose_name = _("scope hour")
        verbose_name_plural = _("scope hours")
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hour", "department"], name="scopehour_unique"),
            models.UniqueConstraint(
                fields=["cluster", "hour"],
                condition=models.Q(department__isnull=True),
                name="scopehour_unique_cluster",
            ),
        ]
        indexes = [models.Index(fields=["department", "hour"]), models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.department_id or '*'} {self.hour:%Y-%m-%d %H:00}"


class NodeDay(models.Model):
    """Per node and portal day (efficiency.days): NodeHour summed, for day-resolution charts.

    ``day_zone`` is the zone whose midnights cut ``day``: the rollups recompute every row of
    another zone than the current ``TIME_ZONE`` before anything else, so days of two zones are
    never mixed.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    day_zone = models.CharField(max_length=64)  # IANA name; "" for rows of unknown zone
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    owner_department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    available_gpu_s = models.FloatField()
    allocated_gpu_s = models.FloatField()
    sampled_gpu_s = models.FloatField()
    busy_gpu_s = models.FloatField()

    class Meta:
        verbose_name = _("node day")
        verbose_name_plural = _("node days")
        constraints = [models.UniqueConstraint(fields=["node", "day"], name="nodeday_unique")]
        # day_zone: "is any row of another zone?" is a min/max on this index, not a table scan.
        indexes = [models.Index(fields=["owner_department", "day"]), models.Index(fields=["day_zone"])]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.day}"
