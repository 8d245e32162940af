"""The review pipeline, phase by phase (flow.py), and the forges where a run's pull request
lives and its review goes."""
