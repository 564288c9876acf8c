"""FilterSets shared by the HTML lists and the API, so both accept the same parameters."""

import django_filters
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from efficiency.choices import (
    Confidence,
    FaultCategory,
    IncidentStatus,
    JobSource,
    JobState,
    NodeState,
    RecommendationState,
    Role,
    TicketOrigin,
    TicketSeverity,
    TicketState,
)
from efficiency.forms import IsoDateTimeField, ModelChoiceField
from efficiency.models import Cluster, Department, FaultSignal, Incident, Job, Node, Recommendation, Ticket
from efficiency.models.jobs import not_ended
from efficiency.recommendation_messages import rule_choices
from efficiency.scoping import scope_queryset


def _visible_departments(request) -> QuerySet[Department]:
    # A head may only filter by their own departments: any other code is an invalid choice.
    if request is None:
        return Department.objects.none()
    return scope_queryset(Department.objects.all(), request.user)


class ModelChoiceFilter(django_filters.ModelChoiceFilter):
    field_class = ModelChoiceField


class IsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = IsoDateTimeField


def _yes_no_filter(label, **kwargs) -> django_filters.TypedChoiceFilter:
    """``true``/``false``, or empty for either; anything else is a 400, not silently "no filter".

    The empty choice comes first, so a form submitted untouched does not filter on this.
    """
    return django_filters.TypedChoiceFilter(
        label=label,
        choices=[("", _("Any")), ("true", _("Yes")), ("false", _("No"))],
        coerce=lambda value: value == "true",
        **kwargs,
    )


class DepartmentFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(label=_("Search"), method="search")

    class Meta:
        model = Department
        fields = ["q", "is_active"]

    is_active = _yes_no_filter(_("Active"))

    def search(self, queryset, name, value):
        return queryset.filter(Q(code__icontains=value) | Q(name__icontains=value))


class NodeFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(label=_("Hostname"), field_name="hostname", lookup_expr="icontains")
    cluster = ModelChoiceFilter(label=_("Cluster"), queryset=Cluster.objects.all(), to_field_name="slug")
    state = django_filters.ChoiceFilter(label=_("State"), choices=NodeState.choices)
    owner = ModelChoiceFilter(
        label=_("Owner"),
        field_name="owner_department",
        queryset=_visible_departments,
        to_field_name="code",
    )
    shared_pool = _yes_no_filter(_("Unowned"), field_name="owner_department", lookup_expr="isnull")
    gpu_model = django_filters.CharFilter(label=_("GPU model"), lookup_expr="iexact")
    fault_domain = django_filters.CharFilter(label=_("Fault domain"))
    rdma_capable = _yes_no_filter(_("RDMA capable"))

    class Meta:
        model = Node
        fields = [
            "q",
            "cluster",
            "state",
            "owner",
            "shared_pool",
            "gpu_model",
            "fault_domain",
            "rdma_capable",
        ]


class JobFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(label=_("Search"), method="search")
    cluster = ModelChoiceFilter(label=_("Cluster"), queryset=Cluster.objects.all(), to_field_name="slug")
    department = ModelChoiceFilter(label=_("Department"), queryset=_visible_departments, to_field_name="code")
    state = django_filters.MultipleChoiceFilter(label=_("State"), choices=JobState.choices, method="in_state")
    source = django_filters.ChoiceFilter(label=_("Source"), choices=JobSource.choices)
    user = django_filters.CharFilter(label=_("User"), field_name="user_name")
    submitted_after = IsoDateTimeFilter(
        label=_("Submitted after"), field_name="submitted_at", lookup_expr="gte"
    )
    submitted_before = IsoDateTimeFilter(
        label=_("Submitted before"), field_name="submitted_at", lookup_expr="lt"
    )
    min_gpus = django_filters.NumberFilter(label=_("Min GPUs"), field_name="gpu_count", lookup_expr="gte")

    class Meta:
        model = Job
        fields = [
            "q",
            "cluster",
            "department",
            "state",
            "source",
            "user",
            "submitted_after",
            "submitted_before",
            "min_gpus",
        ]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(external_id__icontains=value))

    def in_state(self, queryset, name, value):
        """Jobs in one of the states; a pending or running job whose end time has passed has ended."""
        if not value:
            return queryset
        still_open = {JobState.PENDING, JobState.RUNNING}
        return queryset.filter(
            Q(state__in=[state for state in value if state not in still_open])
            | (Q(state__in=[state for state in value if state in still_open]) & not_ended())
        )


class IncidentFilter(django_filters.FilterSet):
    """``?status=``, ``?category=`` (root cause), ``?job=<external id>`` of the incidents API."""

    status = django_filters.ChoiceFilter(label=_("Status"), choices=IncidentStatus.choices)
    category = django_filters.ChoiceFilter(label=_("Root cause"), choices=FaultCategory.choices)
    job = django_filters.CharFilter(label=_("Job"), field_name="job__external_id")

    class Meta:
        model = Incident
        fields = ["status", "category", "job"]


class FaultSignalFilter(django_filters.FilterSet):
    """``?category=`` and ``?node=<hostname>`` of the fault-signals API (its range is a RangeForm)."""

    category = django_filters.ChoiceFilter(label=_("Category"), choices=FaultCategory.choices)
    node = django_filters.CharFilter(label=_("Node"), field_name="node__hostname")

    class Meta:
        model = FaultSignal
        fields = ["category", "node"]


class StableOrderingFilter(django_filters.OrderingFilter):
    """An OrderingFilter whose rows keep one order where the chosen field ties (two tickets opened
    in the same instant, two recommendations with the same gain): the id breaks the tie, so a
    page, its CSV and the next page agree."""

    def filter(self, qs, value):
        qs = super().filter(qs, value)
        if not value:
            return qs
        return qs.order_by(*qs.query.order_by, "pk")


class RecommendationFilter(django_filters.FilterSet):
    """The review queue's and the lists' filters: ``?rule=``, ``?department=<code>``,
    ``?state=``, ``?confidence=``, ``?min_gain=<GPU-hours per week>``, ``?sort=``."""

    rule = django_filters.ChoiceFilter(label=_("Rule"), choices=rule_choices)
    department = ModelChoiceFilter(label=_("Department"), queryset=_visible_departments, to_field_name="code")
    state = django_filters.ChoiceFilter(label=_("State"), choices=RecommendationState.choices)
    confidence = django_filters.ChoiceFilter(label=_("Confidence"), choices=Confidence.choices)
    min_gain = django_filters.NumberFilter(
        label=_("Gain at least (GPU-h/week)"), field_name="gain_gpu_h_week", lookup_expr="gte", min_value=0
    )
    sort = StableOrderingFilter(
        label=_("Sort"),
        fields=(("gain_gpu_h_week", "gain"), ("gain_pct", "gain_pct"), ("last_seen", "last_seen")),
        field_labels={
            "-gain": _("Most GPU-hours to gain"),
            "-gain_pct": _("Largest share to gain"),
            "-last_seen": _("Seen most recently"),
        },
    )

    class Meta:
        model = Recommendation
        fields = ["rule", "department", "state", "confidence", "min_gain"]


def _ticket_assignees(request):
    """Who a ticket on the board can be assigned to: heads of the departments the user sees, and
    platform admins; a head picks among their own departments' heads only."""
    if request is None:
        return get_user_model().objects.none()
    users = get_user_model().objects.filter(is_active=True)
    departments = _visible_departments(request)
    return (
        (users.filter(headed_departments__in=departments) | users.filter(groups__name=Role.PLATFORM_ADMIN))
        .distinct()
        .order_by("username")
    )


class TicketFilter(django_filters.FilterSet):
    """The ticket board's filters: ``?state=`` (repeatable), ``?department=<code>``,
    ``?assignee=<username>`` (``null``: unassigned), ``?severity=``, ``?origin=``,
    ``?sla=overdue|due_soon|on_time``, ``?q=`` (title, description, ``#id``), ``?sort=``.

    Filters the board's queryset (``selectors.tickets.ticket_board``: its ``overdue`` and
    ``severity_rank`` annotations); "due soon" is counted in business hours on the working calendar,
    which the view does and hands over as ``due_soon_ids``.
    """

    OVERDUE, DUE_SOON, ON_TIME = "overdue", "due_soon", "on_time"

    q = django_filters.CharFilter(label=_("Search"), method="search")
    state = django_filters.MultipleChoiceFilter(label=_("State"), choices=TicketState.choices)
    department = ModelChoiceFilter(
        label=_("Department"), queryset=_visible_departments, to_field_name="code", empty_label=_("Any")
    )
    assignee = ModelChoiceFilter(
        label=_("Assignee"),
        queryset=_ticket_assignees,
        to_field_name="username",
        null_label=_("Unassigned"),
        empty_label=_("Any"),
    )
    severity = django_filters.ChoiceFilter(
        label=_("Severity"), choices=TicketSeverity.choices, empty_label=_("Any")
    )
    origin = django_filters.ChoiceFilter(
        label=_("Origin"), choices=TicketOrigin.choices, empty_label=_("Any")
    )
    sla = django_filters.ChoiceFilter(
        label=_("Due date"),
        choices=[(OVERDUE, _("Overdue")), (DUE_SOON, _("Due soon")), (ON_TIME, _("On time"))],
        method="by_sla",
        empty_label=_("Any"),
    )
    sort = StableOrderingFilter(
        label=_("Sort"),
        empty_label=_("By state, overdue first"),
        fields=(
            ("due_at", "due"),
            ("severity_rank", "severity"),
            ("created_at", "created"),
            ("updated_at", "updated"),
        ),
        field_labels={
            "due": _("Due first"),
            "-due": _("Due last"),
            "severity": _("Most severe first"),
            "-severity": _("Least severe first"),
            "created": _("Oldest first"),
            "-created": _("Newest first"),
            "updated": _("Changed longest ago"),
            "-updated": _("Changed most recently"),
        },
    )

    class Meta:
        model = Ticket
        fields = ["q", "state", "department", "assignee", "severity", "origin", "sla"]

    def __init__(self, *args, due_soon_ids=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.due_soon_ids = list(due_soon_ids)

    def search(self, queryset, name, value):
        text = value.strip()
        query = Q(title__icontains=text) | Q(description__icontains=text)
        if text.removeprefix("#").isdigit() and len(text) < 12:
            query |= Q(pk=int(text.removeprefix("#")))
        return queryset.filter(query)

    def by_sla(self, queryset, name, value):
        if value == self.OVERDUE:
            return queryset.filter(overdue=True)
        if value == self.DUE_SOON:
            return queryset.filter(pk__in=self.due_soon_ids)
        if value == self.ON_TIME:
            return queryset.filter(state__in=TicketState.active(), overdue=False).exclude(
                pk__in=self.due_soon_ids
            )
        return queryset
