from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


def _roles_ensure(sender, **kwargs) -> None:
    """The role groups and their permissions exist after every migrate and every flush.

    Data migrations create them once; ``manage.py flush`` (and the flush after each transactional
    test) empties the tables and then sends ``post_migrate``, so without this a flushed database
    would have users but no roles, and platform admins an empty admin.
    """
    from django.apps import apps

    if sender is not list(apps.get_app_configs())[-1]:
        return  # once, after every app's permissions were created (axes comes after us)
    from efficiency.services.organisation import roles_ensure

    roles_ensure()


class EfficiencyConfig(AppConfig):
    name = "efficiency"
    verbose_name = _("GPU efficiency")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_roles_ensure, dispatch_uid="efficiency.roles_ensure")
