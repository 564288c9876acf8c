"""Jobs as a user may see them."""

from django.db.models import QuerySet

from efficiency.models import Job
from efficiency.scoping import User, scope_queryset


def job_list(*, user: User) -> QuerySet[Job]:
    return scope_queryset(Job.objects.all(), user).select_related("cluster", "department")


def job_get(*, user: User, pk: int) -> Job:
    """One job; raises ``Job.DoesNotExist`` outside the user's scope."""
    return job_list(user=user).prefetch_related("nodes").get(pk=pk)
