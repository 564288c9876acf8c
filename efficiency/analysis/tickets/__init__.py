"""Remediation tickets, the pure decisions: the workflow table (``workflow``), the working
calendar the SLA is counted in (``calendar``) and the before/after verification of a fix's gain
(``verification``). The models, pages and notifications that use them come with the tickets
capability (issue 17)."""
