from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class EfficiencyConfig(AppConfig):
    name = "efficiency"
    verbose_name = _("GPU efficiency")
    default_auto_field = "django.db.models.BigAutoField"
