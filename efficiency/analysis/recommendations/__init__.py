"""Tuning recommendations: pure rules that compare a job's config, logs and metrics with the ideal.

- ``evidence.py``: the shared value types (an evidence line: file, line number, text);
- ``logfacts.py``: what a job's log lines say about its setup (NCCL transports per channel, NCCL
  variables set by the environment, data loader and precision settings, checkpoint saves);
- ``rules.py``: the catalog, one rule per misconfiguration, each with a stable id, the ideal, the
  change to apply, the expected gain and the published source it comes from.
"""
