"""Intake: what becomes of an event that reached Tasuku. Pull request events and run
requests (pull_requests.py) go through admission, the pure decision from the policy
(admission.py); comment commands, re-runs and manual reviews (triggers.py) and merge
queue groups (merge_queue.py) ask for runs too."""
