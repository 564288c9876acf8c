"""The committee's review: sealing, the audit chain, and the pack's analyses (pure Python)."""
