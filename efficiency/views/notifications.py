"""A person's own notification settings: the events they hear of, and whether by email."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from efficiency.choices import NotificationEvent
from efficiency.permissions import EVERY_ROLE
from efficiency.services import notifications as services
from efficiency.views.helpers import role_required

# What each event is, in the words of the one who hears of it.
EVENT_HELP = {
    NotificationEvent.TICKET_ASSIGNED: gettext_lazy("A ticket is assigned to you."),
    NotificationEvent.TICKET_DUE_SOON: gettext_lazy(
        "A ticket you are assigned, or of a department you head, is due soon."
    ),
    NotificationEvent.TICKET_OVERDUE: gettext_lazy(
        "A ticket you are assigned, or of a department you head, is overdue."
    ),
    NotificationEvent.TICKET_VERIFIED: gettext_lazy(
        "A fix was measured: gain, no gain or regression (your departments'; the committee and "
        "platform admins: every department's)."
    ),
    NotificationEvent.RECOMMENDATION_ACCEPTED: gettext_lazy(
        "A recommendation your department is to carry out was accepted."
    ),
    NotificationEvent.INCIDENT_OPENED: gettext_lazy(
        "An incident was opened (of the departments you may see)."
    ),
}


@role_required(*EVERY_ROLE)
def notification_settings_view(request: HttpRequest) -> HttpResponse:
    """Show and change the events the user hears of by email; bad input changes nothing (400)."""
    allowed = services.subscribable_events(request.user)
    chosen, email = services.subscription_events(request.user)
    status = 200
    if request.method == "POST":
        events = request.POST.getlist("events")
        email = request.POST.get("email") == "on"
        try:
            services.subscription_save(user=request.user, events=events, email=email)
        except services.SubscriptionRefused as refused:
            messages.error(request, str(refused))
            status = 400
        else:
            messages.success(request, _("Your notification settings are saved."))
            return redirect("efficiency:notification-settings")
    rows = [
        {
            "value": event,
            "label": NotificationEvent(event).label,
            "help": EVENT_HELP[event],
            "on": event in chosen,
        }
        for event in allowed
    ]
    context = {"rows": rows, "email": email, "address": request.user.email}
    return render(request, "efficiency/notifications/settings.html", context, status=status)
