"""The three role groups exist in every database, so assigning a role never has to create one."""

from django.db import migrations

ROLE_GROUPS = ["department_head", "committee", "platform_admin"]


def create_groups(apps, schema_editor):
    group_model = apps.get_model("auth", "Group")
    for name in ROLE_GROUPS:
        group_model.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("efficiency", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
