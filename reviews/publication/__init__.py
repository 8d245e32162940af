"""Publication and reconciliation: the review and its inline comments (review.py),
Tasuku's threads kept honest across pushes, the walkthrough, and one-click fixes as a
pull request."""
