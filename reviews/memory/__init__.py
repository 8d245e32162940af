"""What reviews learn: what became of each finding (outcomes.py) and a repository's short
memory, folded on a durable queue (folds.py)."""
