"""People's replies on Tasuku's threads and Tasuku's answers (replies.py); replies a
model reviewer thinks about (thinking.py)."""
