"""Reviewers replayed over a repository's own history and scored by what its authors did
next (`manage.py evaluate`)."""
