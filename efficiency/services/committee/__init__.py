"""The GPU committee, the write side: sealed review packs (``pack``), meetings, decisions and
actions (``meetings``), exports (``export``) and the hash-chained audit trail (``audit``). The
pure parts (sealing, the chain, the pack's analyses) are in ``efficiency.analysis.committee``.
"""
