"""What each role may do: the role sets every page and API endpoint checks, the departments a
head acts for, and the Django model permissions of the role groups.

Which rows a role *sees* is ``efficiency.scoping``'s; what it may *do* with them is decided here.
A page's ``role_required(*QUOTA_PLANNERS)`` and an API view's ``roles = QUOTA_PLANNERS`` name the
same set, so a role change is made once for both.

Platform admins run the inventory (clusters, departments and their heads, mappings, nodes and
GPUs), the data sources, fault policies and actuators, users and their roles, and API tokens in
the Django admin. They read jobs, source runs, worker heartbeats, the audit trail (history of
incidents, quotas, nodes, sources, users) and login lockouts there (deleting one unlocks). They
never delete nodes or departments (retire or deactivate them: history stays). Committee members and
department heads work in the portal's own pages and need no model permissions.

``role_permissions_grant`` takes the model classes as arguments so that a data migration can
pass its historical models (migrations 0011 and 0016 grant these to existing databases).
"""

from django.db.models import QuerySet

from efficiency.choices import Role
from efficiency.models import Department
from efficiency.scoping import User, user_role

# --- Role sets per action -----------------------------------------------------------------------

EVERY_ROLE = (Role.DEPARTMENT_HEAD, Role.COMMITTEE, Role.PLATFORM_ADMIN)
# The cluster overview compares every department: not for heads (they have their home page).
USAGE_OVERVIEW_READERS = (Role.COMMITTEE, Role.PLATFORM_ADMIN)

QUOTA_READERS = EVERY_ROLE
QUOTA_PLANNERS = (Role.COMMITTEE,)  # propose, edit, approve, answer objections, run backtests
QUOTA_EXPORTERS = (Role.COMMITTEE, Role.PLATFORM_ADMIN)  # scheduler exports, and read backtests
QUOTA_OBJECTORS = (Role.DEPARTMENT_HEAD,)  # for a department they head (``headed_departments``)

FAULT_READERS = EVERY_ROLE
FAULT_OPERATORS = (Role.PLATFORM_ADMIN,)  # isolate, restart, return to service, close

SOURCE_ADMINS = (Role.PLATFORM_ADMIN,)  # data source pages, and pushing logs to any source
NODE_EDITORS = (Role.PLATFORM_ADMIN,)  # a node's rack, owner, RDMA and state reason (API PATCH)

RECOMMENDATION_READERS = EVERY_ROLE  # heads: their departments' recommendations ("What to fix")
RECOMMENDATION_REVIEWERS = (Role.PLATFORM_ADMIN,)  # the review queue: accept, reject, snooze
# Comment: admins and the committee on any, a head on those of a department they head.
RECOMMENDATION_COMMENTERS = EVERY_ROLE

# Tickets: everyone reads the tickets they see (heads: their departments'), comments on them and
# moves them along the workflow; a head creates tickets for a department they head. Platform admins
# and the committee create them for any department, edit every field, write internal notes and see
# them; a head may reassign a ticket within their department.
TICKET_READERS = EVERY_ROLE
TICKET_CREATORS = EVERY_ROLE
TICKET_MANAGERS = (Role.COMMITTEE, Role.PLATFORM_ADMIN)  # every field, any department, internal notes


def has_role(user: User, roles: tuple[Role, ...]) -> bool:
    """Whether the user's portal role is one of ``roles``."""
    return user_role(user) in roles


def headed_departments(user: User) -> QuerySet[Department]:
    """The departments ``user`` heads and acts for as a department head (objects for them).

    Empty for every other role: a committee member who also heads a department acts as the
    committee, as scoping does.
    """
    if user_role(user) != Role.DEPARTMENT_HEAD:
        return Department.objects.none()
    return Department.objects.filter(heads=user)


# --- Model permissions of the role groups (the Django admin) --------------------------------------

VIEW, ADD, CHANGE, DELETE = "view", "add", "change", "delete"

ROLE_MODEL_PERMISSIONS: dict[Role, dict[tuple[str, str], list[str]]] = {
    Role.PLATFORM_ADMIN: {
        ("efficiency", "cluster"): [VIEW, ADD, CHANGE],
        ("efficiency", "department"): [VIEW, ADD, CHANGE],
        ("efficiency", "departmentmapping"): [VIEW, ADD, CHANGE, DELETE],
        ("efficiency", "node"): [VIEW, ADD, CHANGE],
        ("efficiency", "gpu"): [VIEW, ADD, CHANGE, DELETE],
        ("efficiency", "datasource"): [VIEW, ADD, CHANGE, DELETE],
        ("efficiency", "sourcerun"): [VIEW],
        ("efficiency", "job"): [VIEW],
        ("efficiency", "workerheartbeat"): [VIEW],
        ("efficiency", "faultpolicy"): [VIEW, ADD, CHANGE],
        ("efficiency", "actuatorconfig"): [VIEW, ADD, CHANGE, DELETE],
        ("efficiency", "nodestatechange"): [VIEW],
        ("efficiency", "incident"): [VIEW],
        ("efficiency", "quotacycle"): [VIEW],
        ("efficiency", "quota"): [VIEW],
        ("efficiency", "recommendation"): [VIEW],
        ("efficiency", "recommendationdecision"): [VIEW],
        ("efficiency", "joblogfacts"): [VIEW],
        ("efficiency", "logfactscursor"): [VIEW],
        ("efficiency", "ticket"): [VIEW],
        ("efficiency", "ticketcomment"): [VIEW],
        # Notifications: channels are configured here; deliveries are read (and retried).
        ("efficiency", "notificationchannel"): [VIEW, ADD, CHANGE, DELETE],
        ("efficiency", "notificationsubscription"): [VIEW, ADD, CHANGE],
        ("efficiency", "notification"): [VIEW],
        ("efficiency", "delivery"): [VIEW, CHANGE],
        # The committee's records are written by its pages and sealed: read only here.
        ("efficiency", "reviewpack"): [VIEW],
        ("efficiency", "reviewmeeting"): [VIEW],
        ("efficiency", "decision"): [VIEW],
        ("efficiency", "action"): [VIEW],
        ("efficiency", "ratecard"): [VIEW],
        ("efficiency", "auditentry"): [VIEW],
        ("auth", "user"): [VIEW, ADD, CHANGE],
        ("auth", "group"): [VIEW],
        ("efficiency", "apitoken"): [VIEW, ADD, CHANGE, DELETE],
        # Login throttling (django-axes): who is locked out; deleting an attempt unlocks.
        ("axes", "accessattempt"): [VIEW, DELETE],
        ("axes", "accesslog"): [VIEW],
        ("axes", "accessfailurelog"): [VIEW],
    },
}


def role_permissions_grant(*, group_model, permission_model) -> None:
    """Give every role group the model permissions listed above (adds; never removes)."""
    for role, models in ROLE_MODEL_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=role.value)
        for (app_label, model), actions in models.items():
            codenames = [f"{action}_{model}" for action in actions]
            group.permissions.add(
                *permission_model.objects.filter(content_type__app_label=app_label, codename__in=codenames)
            )


def role_permissions_grant_migration(apps, schema_editor) -> None:
    """``role_permissions_grant`` as a data migration's ``RunPython`` step.

    The permissions of models a migration adds are created only after the last migration
    (post_migrate): they are created here first, so that they can be granted.
    """
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    role_permissions_grant(
        group_model=apps.get_model("auth", "Group"), permission_model=apps.get_model("auth", "Permission")
    )
