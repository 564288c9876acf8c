"""A deterministic simulator of a GPU cluster that speaks the real sources' formats."""
