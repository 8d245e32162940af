"""Runners execute an engine on a checkout inside a sandbox and return its result."""
