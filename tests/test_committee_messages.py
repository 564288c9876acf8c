"""The decisions a pack asks for are worded once, with their numbers, for page, PDF and agenda."""

from django.test import override_settings
from django.utils import translation

from efficiency.committee_messages import decision_request_text


@override_settings(TIME_ZONE="Asia/Shanghai")
def test_each_request_names_what_to_decide_and_its_numbers():
    quota = {
        "kind": "quota",
        "ref": 7,
        "params": {"start": "2026-12-01T16:00:00Z", "end": "2026-12-15T16:00:00Z"},
    }
    capacity = {
        "kind": "capacity", "ref": 3,
        "params": {"gpu_model": "NVIDIA H100 80GB HBM3", "kind": "pool_exhausted", "gpus_needed": 16},
    }  # fmt: skip
    trend = {"kind": "capacity", "ref": 4, "params": {"gpu_model": "A100", "kind": "demand_trend"}}
    ticket = {"kind": "ticket", "ref": 12, "params": {"department": "vision", "title": "Enable NCCL RDMA"}}
    with translation.override("en"):
        # Midnight in Shanghai is 16:00 UTC the day before: the committee's days are shown.
        assert (
            decision_request_text(quota)
            == "Approve the proposed quotas of cycle #7 (2026-12-02 to 2026-12-16)"
        )
        assert decision_request_text(capacity) == (
            "Decide on a capacity order for NVIDIA H100 80GB HBM3: Shared pool exhausted, 16 GPUs needed"
        )
        assert (
            decision_request_text(trend)
            == "Decide on a capacity order for A100: Demand trend crosses capacity"
        )
        assert decision_request_text(ticket) == "Overdue remediation ticket #12 of vision: Enable NCCL RDMA"
        # An agenda item keeps the request's kind as ``decision_kind``.
        assert decision_request_text(
            {"decision_kind": "ticket", "ref": 12, "params": ticket["params"]}
        ).startswith("Overdue remediation ticket #12")
    with translation.override("zh-hans"):
        assert "#7" in decision_request_text(quota)
        assert "Approve" not in decision_request_text(quota)
