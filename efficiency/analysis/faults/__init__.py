"""Fault analysis: progress parsed from job logs and the detectors that turn it into evidence."""
