"""Pure analysis functions: plain Python in, plain Python out; no Django, no clock, no settings."""
