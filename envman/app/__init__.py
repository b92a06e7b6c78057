"""Use cases: plain options in, result values out (no printing, no exiting)."""
