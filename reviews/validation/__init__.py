"""Findings held to the contract before anything is published: the validation gate
(findings.py), inline anchors, and reconciliation with the earlier findings."""
