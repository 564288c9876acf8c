"""Collectors: one module per source, each turning that source's real format into typed records.

Nothing here touches the database; the ingest services in ``efficiency.services`` store what the
collectors return. Every parser keeps the good part of bad input and reports the rest as
``Rejected`` entries with the offending excerpt.
"""
