"""The platform_admin group gets the model permissions its role needs in the Django admin
(efficiency.permissions.ROLE_MODEL_PERMISSIONS), in every existing and new database."""

from django.db import migrations

from efficiency.permissions import role_permissions_grant_migration


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

    operations = [migrations.RunPython(role_permissions_grant_migration, revoke)]
