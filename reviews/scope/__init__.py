"""What a review covers: the diff, the path filters and compression, what can be reviewed,
the secondary repositories, triage, the monthly budget, the coverage ledger and the
guideline packs."""
