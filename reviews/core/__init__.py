"""The review's core, shared by every kind of run: what a run carries (context.py), what a
kind of run adds (modes.py), and the stages from a checkout to validated findings."""
