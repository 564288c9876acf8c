"""Remediation tickets: pure decisions."""
