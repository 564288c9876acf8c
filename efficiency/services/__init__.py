"""The write side: one function per use case, each in one transaction."""
