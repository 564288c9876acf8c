"""Remediation tickets: the workflow table and the working calendar the SLA is counted in."""
