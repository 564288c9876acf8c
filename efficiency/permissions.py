"""What each role may do beyond reading: the Django model permissions of the role groups.

Platform admins run the inventory (clusters, departments and their heads, mappings, nodes and
GPUs), the data sources, fault policies and actuators, users and their roles, and API tokens in
the Django admin. They read jobs, source runs, worker heartbeats, the audit trail (history of
incidents, quotas, nodes, sources, users) and login lockouts there (deleting one unlocks). They
never delete nodes or departments (retire or deactivate them: history stays). Committee members and
department heads work in the portal's own pages and need no model permissions.

``role_permissions_grant`` takes the model classes as arguments so that a data migration can
pass its historical models (migrations 0011 and 0016 grant these to existing databases).
"""

from efficiency.choices import Role

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
