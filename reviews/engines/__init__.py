"""The worker's side of the sandbox boundary: which engine and runner a review gets, what
they are given (boundary.py), and the connector calls made on the engine's behalf."""
