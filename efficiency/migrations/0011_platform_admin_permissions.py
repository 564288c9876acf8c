"""The platform_admin group gets the model permissions its role needs in the Django admin
(efficiency.permissions.ROLE_MODEL_PERMISSIONS), in every existing and new database."""

from django.contrib.auth.management import create_permissions
from django.db import migrations


def grant(apps, schema_editor):
    from efficiency.permissions import role_permissions_grant

    # On a new database permissions are created after the last migration (post_migrate):
    # create them now so that they can be granted here.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    role_permissions_grant(
        group_model=apps.get_model("auth", "Group"), permission_model=apps.get_model("auth", "Permission")
    )


def revoke(apps, schema_editor):
    group = apps.get_model("auth", "Group").objects.filter(name="platform_admin").first()
    if group is not None:
        group.permissions.clear()


class Migration(migrations.Migration):
    dependencies = [
        ("efficiency", "0010_gpusample_ecc"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
