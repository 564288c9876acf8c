"""Forms and form fields shared by pages and API: the time-range picker, and the fields every
query parameter goes through, so that a hostile value is a 400 naming it on both, never a 500."""

from datetime import UTC, date, datetime, time, timedelta

import django_filters.fields
from django import forms
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    ProhibitNullCharactersValidator,
)
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from efficiency.timeranges import TimeRange

PRESETS = {
    "24h": (timedelta(hours=24), _("Last 24 hours")),
    "7d": (timedelta(days=7), _("Last 7 days")),
    "14d": (timedelta(days=14), _("Last 14 days (one cycle)")),
    "30d": (timedelta(days=30), _("Last 30 days")),
    "90d": (timedelta(days=90), _("Last 90 days")),
}
DEFAULT_RANGE = "7d"
MAX_CUSTOM_DAYS = 400


# Custom ranges stay within these days: every range, its previous period (for trends) and its
# bounds in any time zone then fit in ``datetime`` and PostgreSQL, and no usage data is older.
FIRST_DAY = date(1970, 1, 1)
LAST_DAY = date(2999, 12, 31)

# PostgreSQL's limit for a time zone displacement, and the world's widest offset is +14:00.
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59)


def checked_moment(moment: datetime | None) -> datetime | None:
    """``moment`` if the database can compare with it; a ValidationError with the reason if not."""
    if moment is None:
        return None
    offset = moment.utcoffset()
    if offset is not None and abs(offset) > MAX_UTC_OFFSET:
        raise forms.ValidationError(
            _("The time zone offset must be between -15:59 and +15:59."), code="offset_out_of_range"
        )
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise forms.ValidationError(
            _("Enter a time between the years 1 and 9999 (in UTC)."), code="out_of_range"
        ) from None
    return moment


class IsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time (as django-filter reads it) that the database can compare with."""

    def to_python(self, value):
        return checked_moment(super().to_python(value))


class ModelChoiceField(django_filters.fields.ModelChoiceField):
    """A choice by key; a key with a NUL byte is refused before it reaches the database
    (PostgreSQL cannot hold one in text and raised a 500)."""

    def to_python(self, value):
        if isinstance(value, str):
            ProhibitNullCharactersValidator()(value)
        return super().to_python(value)


def _day_field(label) -> forms.DateField:
    return forms.DateField(
        label=label,
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[
            MinValueValidator(FIRST_DAY, _("Enter a day from %(limit_value)s on.")),
            MaxValueValidator(LAST_DAY, _("Enter a day up to %(limit_value)s.")),
        ],
    )


def _floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


class RangeForm(forms.Form):
    """``?range=7d`` (a preset) or ``?range=custom&start=2026-11-01&end=2026-11-14`` (days in the
    display time zone, both inclusive). Presets end with the current, partial hour."""

    range = forms.ChoiceField(
        label=_("Range"),
        choices=[*((key, label) for key, (_, label) in PRESETS.items()), ("custom", _("Custom"))],
        required=False,
    )
    start = _day_field(_("From"))
    end = _day_field(_("To"))

    def __init__(self, data=None, *, now: datetime | None = None, **kwargs):
        super().__init__(data, **kwargs)
        self.now = now or timezone.now()

    def clean(self):
        cleaned = super().clean()
        key = cleaned.get("range") or DEFAULT_RANGE
        if key != "custom":
            end = _floor_hour(self.now) + timedelta(hours=1)
            cleaned["time_range"] = TimeRange(key, end - PRESETS[key][0], end)
            return cleaned
        # Each error names its field, so that the API's 400 says which parameter to fix.
        start_day, end_day = cleaned.get("start"), cleaned.get("end")
        if start_day is None or end_day is None:
            for name, day in (("start", start_day), ("end", end_day)):
                if day is None and name not in self.errors:
                    self.add_error(name, _("A custom range needs a start and an end date."))
            return cleaned
        if end_day < start_day:
            self.add_error("end", _("The end date is before the start date."))
            return cleaned
        if (end_day - start_day).days + 1 > MAX_CUSTOM_DAYS:
            self.add_error(
                "end",
                forms.ValidationError(
                    _("A range can cover at most %(days)s days."), params={"days": MAX_CUSTOM_DAYS}
                ),
            )
            return cleaned
        tz = timezone.get_current_timezone()
        start = datetime.combine(start_day, time.min, tzinfo=tz)
        end = datetime.combine(end_day + timedelta(days=1), time.min, tzinfo=tz)
        cleaned["time_range"] = TimeRange("custom", _floor_hour(start), _floor_hour(end))
        return cleaned


def time_range_from_request(params, *, now: datetime | None = None) -> tuple[RangeForm, TimeRange | None]:
    """The bound range form and its range (None when the parameters are invalid)."""
    form = RangeForm(params or None, now=now)
    if not params or not form.is_bound:
        form = RangeForm({"range": DEFAULT_RANGE}, now=now)
    if form.is_valid():
        return form, form.cleaned_data["time_range"]
    return form, None


class ClusterForm(forms.Form):
    """``?cluster=<slug>`` on the quota pages (empty: the first cluster with nodes)."""

    cluster = forms.SlugField(label=_("Cluster"), required=False, max_length=50)


class QuotaEditForm(forms.Form):
    """One proposed quota as a committee member edits it (prefixed with the quota's id)."""

    guaranteed_gpus = forms.IntegerField(label=_("Guaranteed GPUs"), min_value=0, max_value=1_000_000)
    borrowing_limit_gpus = forms.IntegerField(
        label=_("Borrowing limit (GPUs)"), min_value=0, max_value=1_000_000, required=False
    )


class CommentForm(forms.Form):
    """Why a committee member edits or approves quotas: required, it goes into the history."""

    comment = forms.CharField(
        label=_("Comment (why)"), max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )


class ObjectionForm(forms.Form):
    department = forms.ModelChoiceField(label=_("Department"), queryset=None, empty_label=None)
    text = forms.CharField(label=_("Objection"), max_length=4000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, departments, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["department"].queryset = departments


class AnswerForm(forms.Form):
    response = forms.CharField(label=_("Answer"), max_length=4000, widget=forms.Textarea(attrs={"rows": 2}))


# --- Tickets ----------------------------------------------------------------------------------------
# The forms only read the input; the ticket services check it (lengths, the assignee's department, a
# due date in the future) and their refusal is shown beside the field it names.


class _DueField(forms.DateTimeField):
    """A due date as the browser's ``datetime-local`` sends it, in the display time zone."""

    widget = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")

    def to_python(self, value):
        return checked_moment(super().to_python(value))


class TicketCreateForm(forms.Form):
    """A ticket opened by hand: the department among those the user may open tickets for, and an
    assignee among its heads and the platform admins (``assignees``)."""

    department = forms.ModelChoiceField(label=_("Department"), queryset=None, to_field_name="code")
    title = forms.CharField(label=_("Title"), strip=True)
    description = forms.CharField(
        label=_("Description"), required=False, widget=forms.Textarea(attrs={"rows": 5})
    )
    severity = forms.ChoiceField(label=_("Severity"), choices=())
    assignee = forms.ModelChoiceField(
        label=_("Assignee"),
        queryset=None,
        required=False,
        to_field_name="username",
        empty_label=_("Nobody yet"),
    )
    due_at = _DueField(
        label=_("Due"),
        required=False,
        help_text=_("Leave empty to take the severity's SLA on the working calendar."),
    )

    def __init__(self, *args, departments, assignees, severities, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["department"].queryset = departments
        self.fields["assignee"].queryset = assignees
        self.fields["severity"].choices = severities


class TicketEditForm(forms.Form):
    """A ticket's editable fields; ``editable`` names those the user may change (a head: the
    assignee), the others are left out of the form."""

    title = forms.CharField(label=_("Title"), strip=True)
    description = forms.CharField(
        label=_("Description"), required=False, widget=forms.Textarea(attrs={"rows": 4})
    )
    severity = forms.ChoiceField(label=_("Severity"), choices=())
    assignee = forms.ModelChoiceField(
        label=_("Assignee"), queryset=None, required=False, to_field_name="username", empty_label=_("Nobody")
    )
    due_at = _DueField(label=_("Due"))
    meeting = forms.CharField(label=_("Committee meeting"), required=False, strip=True)

    def __init__(self, *args, editable, assignees, severities, **kwargs):
        super().__init__(*args, **kwargs)
        for name in list(self.fields):
            if name not in editable:
                del self.fields[name]
        if "assignee" in self.fields:
            self.fields["assignee"].queryset = assignees
        if "severity" in self.fields:
            self.fields["severity"].choices = severities


class TicketCommentForm(forms.Form):
    text = forms.CharField(label=_("Comment"), strip=True, widget=forms.Textarea(attrs={"rows": 3}))
    internal = forms.BooleanField(
        label=_("Internal note (committee and platform admins only)"), required=False
    )


class TicketMoveForm(forms.Form):
    reason = forms.CharField(
        label=_("Reason"), required=False, strip=True, widget=forms.Textarea(attrs={"rows": 2})
    )


# --- Committee meetings --------------------------------------------------------------------------


class MeetingCreateForm(forms.Form):
    """Plan the next committee meeting from a pack; ``people`` are those who may attend."""

    pack = forms.IntegerField(widget=forms.HiddenInput, min_value=1, max_value=2**31 - 1)
    title = forms.CharField(
        label=_("Title"), required=False, max_length=200, help_text=_("Leave empty for the period's name.")
    )
    scheduled_for = _DueField(label=_("When"))
    attendees = forms.ModelMultipleChoiceField(
        label=_("Attendees"), queryset=None, required=False, to_field_name="username"
    )
    guests = forms.CharField(label=_("Other attendees"), required=False, max_length=500)

    def __init__(self, *args, people, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["attendees"].queryset = people


class DecisionForm(forms.Form):
    """A decision of a meeting, recorded once; the kind says which of the optional parts apply."""

    kind = forms.ChoiceField(label=_("Kind"), choices=())
    title = forms.CharField(label=_("Decision"), max_length=200)
    options = forms.CharField(
        label=_("Options considered"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("One per line."),
    )
    outcome = forms.CharField(label=_("Outcome"), max_length=4000, widget=forms.Textarea(attrs={"rows": 2}))
    decided_by = forms.CharField(
        label=_("Decided by"),
        max_length=300,
        help_text=_("Who decided, and how: a vote, unanimous, the chair."),
    )
    supersedes = forms.ModelChoiceField(
        label=_("Supersedes"), queryset=None, required=False, empty_label=_("Nothing (a new decision)")
    )
    quota_cycle = forms.ModelChoiceField(label=_("Quota cycle"), queryset=None, required=False)
    quota_approve = forms.BooleanField(
        label=_("Approve this quota cycle now"),
        required=False,
        help_text=_("Approves the proposal on the quota page, with the outcome as its comment."),
    )
    ticket_id = forms.IntegerField(
        label=_("Existing ticket number"), required=False, min_value=1, max_value=2**31 - 1
    )
    ticket_title = forms.CharField(label=_("Or open a ticket titled"), required=False, max_length=200)
    ticket_department = forms.ModelChoiceField(label=_("Ticket department"), queryset=None, required=False)
    ticket_severity = forms.ChoiceField(
        label=_("Ticket severity"), choices=(), required=False, initial="medium"
    )
    capacity_gpu_model = forms.CharField(label=_("GPU model ordered"), required=False, max_length=100)
    capacity_gpus = forms.IntegerField(
        label=_("GPUs ordered"), required=False, min_value=1, max_value=1_000_000
    )

    KIND_FIELDS = {
        "quota": ("quota_cycle", "quota_approve"),
        "ticket": ("ticket_id", "ticket_title", "ticket_department", "ticket_severity"),
        "capacity": ("capacity_gpu_model", "capacity_gpus"),
    }

    def __init__(self, *args, kinds, severities, supersedable, cycles, departments, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = kinds
        self.fields["ticket_severity"].choices = severities
        self.fields["supersedes"].queryset = supersedable
        self.fields["quota_cycle"].queryset = cycles
        self.fields["ticket_department"].queryset = departments


class ActionForm(forms.Form):
    title = forms.CharField(label=_("Action"), max_length=300)
    owner = forms.ModelChoiceField(label=_("Owner"), queryset=None, to_field_name="username")
    due_on = forms.DateField(label=_("Due"), widget=forms.DateInput(attrs={"type": "date"}))
    decision = forms.ModelChoiceField(
        label=_("From decision"), queryset=None, required=False, empty_label=_("None")
    )

    def __init__(self, *args, people, decisions, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["owner"].queryset = people
        self.fields["decision"].queryset = decisions


class ActionCloseForm(forms.Form):
    status = forms.ChoiceField(label=_("Close as"), choices=(("done", _("Done")), ("dropped", _("Dropped"))))
    note = forms.CharField(label=_("Note"), required=False, max_length=2000)


class MinutesForm(forms.Form):
    minutes = forms.CharField(
        label=_("Minutes"), required=False, max_length=50_000, widget=forms.Textarea(attrs={"rows": 8})
    )


# --- Committee: rate cards ------------------------------------------------------------------------

RATE_PRICE_PATTERN = r"^\d{1,12}(\.\d{1,4})?$"


def _rate_price(text: str, where: str) -> str:
    import re
    from decimal import Decimal

    text = text.strip()
    if not re.match(RATE_PRICE_PATTERN, text) or Decimal(text) <= 0:
        raise forms.ValidationError(
            _("%(where)s: “%(price)s” is not a positive price (digits, at most 4 decimals, like 12.50)."),
            params={"where": where, "price": text},
        )
    return text


class RateCardForm(forms.Form):
    """A new rate card version: prices per GPU-hour, one "GPU model=price" line each."""

    effective_from = forms.DateTimeField(
        label=_("In force from"),
        help_text=_("Date and time, for example 2026-12-01 00:00 (portal time zone)."),
    )
    currency = forms.RegexField(
        label=_("Currency"),
        regex=r"^[A-Za-z]{3}$",
        initial="CNY",
        error_messages={"invalid": _("Write a three-letter currency code, for example CNY.")},
    )
    rates = forms.CharField(
        label=_("Prices per GPU-hour"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "placeholder": "NVIDIA H100 80GB HBM3=12.50"}),
        help_text=_("One GPU model per line: model=price."),
    )
    default_rate = forms.CharField(
        label=_("Price for other models"), required=False, max_length=20, strip=True
    )
    note = forms.CharField(label=_("Note"), required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean_currency(self) -> str:
        return self.cleaned_data["currency"].upper()

    def clean_rates(self) -> dict[str, str]:
        rates: dict[str, str] = {}
        errors = []
        for number, line in enumerate(self.cleaned_data.get("rates", "").splitlines(), start=1):
            if not line.strip():
                continue
            model, sep, price = line.rpartition("=")
            model = model.strip()
            if not sep or not model:
                errors.append(
                    forms.ValidationError(
                        _("Line %(n)s: write “GPU model=price”."), params={"n": number}, code="format"
                    )
                )
                continue
            if model in rates:
                errors.append(
                    forms.ValidationError(
                        _("Line %(n)s: %(model)s is priced twice."), params={"n": number, "model": model}
                    )
                )
                continue
            try:
                rates[model] = _rate_price(price, _("Line %(n)s") % {"n": number})
            except forms.ValidationError as error:
                errors.append(error)
        if errors:
            raise forms.ValidationError(errors)
        return rates

    def clean_default_rate(self) -> str:
        text = self.cleaned_data.get("default_rate", "")
        return _rate_price(text, _("Price for other models")) if text else ""

    def clean(self):
        cleaned = super().clean()
        if not self.errors and not cleaned.get("rates") and not cleaned.get("default_rate"):
            raise forms.ValidationError(
                _("Give a price for at least one GPU model, or a price for other models.")
            )
        return cleaned
