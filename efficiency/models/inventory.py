"""Inventory: clusters, departments and their scheduler identities, nodes and GPUs."""

from collections.abc import Iterable

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from efficiency.choices import MappingKind, NodeState


class Cluster(models.Model):
    """A GPU cluster the portal watches (one scheduler, one metrics source)."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    slug = models.SlugField(_("slug"), max_length=50, unique=True)
    description = models.TextField(_("description"), blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")

    def __str__(self) -> str:
        return self.name


class DepartmentQuerySet(models.QuerySet):
    def active(self) -> "DepartmentQuerySet":
        return self.filter(is_active=True)


class Department(models.Model):
    """A business department that uses GPUs; its heads see only its data."""

    code = models.SlugField(_("code"), max_length=50, unique=True)
    name = models.CharField(_("name"), max_length=200)
    heads = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("heads"),
        related_name="headed_departments",
        blank=True,
    )
    is_active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    objects = DepartmentQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = _("department")
        verbose_name_plural = _("departments")

    def __str__(self) -> str:
        return self.name


class DepartmentMapping(models.Model):
    """Maps a scheduler identity (Slurm account, Kubernetes namespace) to a department.

    A mapping without a cluster applies to every cluster; one with a cluster wins over it.
    """

    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        help_text=_("Leave empty to apply the mapping to every cluster."),
    )
    kind = models.CharField(_("kind"), max_length=20, choices=MappingKind.choices)
    value = models.CharField(_("value"), max_length=200)
    department = models.ForeignKey(
        Department,
        verbose_name=_("department"),
        on_delete=models.CASCADE,
        related_name="mappings",
    )

    class Meta:
        ordering = ["kind", "value"]
        verbose_name = _("department mapping")
        verbose_name_plural = _("department mappings")
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "value"], name="mapping_unique_per_cluster"),
            models.UniqueConstraint(
                fields=["kind", "value"],
                condition=Q(cluster__isnull=True),
                name="mapping_unique_global",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.value} → {self.department.code}"


class NodeQuerySet(models.QuerySet):
    def for_departments(self, department_ids: Iterable[int]) -> "NodeQuerySet":
        """Nodes a department owns, or on which one of its jobs ran."""
        from efficiency.models.jobs import Job

        ids = list(department_ids)
        ran_there = Job.nodes.through.objects.filter(
            node_id=models.OuterRef("pk"), job__department_id__in=ids
        )
        return self.filter(Q(owner_department_id__in=ids) | Q(models.Exists(ran_there)))

    def in_service(self) -> "NodeQuerySet":
        """Nodes that count in capacity, ownership and quotas: not retired, and confirmed
        (a discovered node's readings are shown, but it adds no capacity until an admin confirms it)."""
        return self.exclude(state__in=[NodeState.RETIRED, NodeState.DISCOVERED])


class Node(models.Model):
    """A GPU server. Without an owning department it is unowned (under quotas: the shared pool)."""

    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="nodes"
    )
    hostname = models.CharField(_("hostname"), max_length=255)
    gpu_model = models.CharField(_("GPU model"), max_length=100)
    gpu_count = models.PositiveSmallIntegerField(_("GPU count"))
    rdma_capable = models.BooleanField(_("RDMA capable"), default=False)
    fault_domain = models.CharField(
        _("fault domain"), max_length=100, blank=True, help_text=_("Rack or switch, e.g. rack-03.")
    )
    state = models.CharField(_("state"), max_length=20, choices=NodeState.choices, default=NodeState.ACTIVE)
    state_reason = models.CharField(_("state reason"), max_length=300, blank=True)
    owner_department = models.ForeignKey(
        Department,
        verbose_name=_("owning department"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="owned_nodes",
        help_text=_("Empty: no department owns the node (unowned)."),
    )
    in_service_from = models.DateTimeField(
        _("in service from"), null=True, blank=True, help_text=_("Empty: since before any data.")
    )
    in_service_until = models.DateTimeField(
        _("in service until"), null=True, blank=True, help_text=_("Set when the node is retired.")
    )
    last_seen_at = models.DateTimeField(
        _("last seen"),
        null=True,
        blank=True,
        help_text=_("When a source last listed or measured the node."),
    )
    discovered_by = models.ForeignKey(
        "efficiency.DataSource",
        verbose_name=_("discovered by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="discovered_nodes",
        help_text=_("The source that first reported the node; empty for a node entered by hand."),
    )
    listed_by = models.ForeignKey(
        "efficiency.DataSource",
        verbose_name=_("listed by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="listed_nodes",
        help_text=_(
            "The node list (Slurm, Kubernetes) that last named the node: only that list retires it "
            "when it stops naming it."
        ),
    )
    missing_since = models.DateTimeField(
        _("missing since"),
        null=True,
        blank=True,
        help_text=_(
            "Set when a source that lists every node stopped listing it (the node was retired then)."
        ),
    )
    reported_state = models.CharField(
        _("state reported by the source"),
        max_length=100,
        blank=True,
        help_text=_("As the scheduler says it, e.g. Slurm's MIXED+DRAIN or Kubernetes' NotReady."),
    )
    reported_reason = models.CharField(_("reason reported by the source"), max_length=300, blank=True)
    source_labels = models.JSONField(
        _("labels from the source"),
        default=dict,
        blank=True,
        help_text=_("Partitions, Kubernetes labels and the like, as the source last reported them."),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["cluster", "hostname"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hostname"], name="node_unique_hostname"),
        ]
        indexes = [models.Index(fields=["owner_department", "state"])]

    def __str__(self) -> str:
        return self.hostname


class Gpu(models.Model):
    """One GPU of a node, as dcgm-exporter names it (index and UUID)."""

    node = models.ForeignKey(Node, verbose_name=_("node"), on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(_("index"))
    uuid = models.CharField(_("UUID"), max_length=64, blank=True)
    model = models.CharField(_("model"), max_length=100)
    memory_mib = models.PositiveIntegerField(_("memory (MiB)"), null=True, blank=True)
    pci_bus_id = models.CharField(_("PCI bus ID"), max_length=32, blank=True)

    class Meta:
        ordering = ["node", "index"]
        verbose_name = _("GPU")
        verbose_name_plural = _("GPUs")
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index"),
            models.UniqueConstraint(fields=["uuid"], condition=~Q(uuid=""), name="gpu_unique_uuid"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname}/gpu{self.index}"
