"""A pull request's own tests after its review, in a check run of their own
(`Tasuku / tests`)."""
