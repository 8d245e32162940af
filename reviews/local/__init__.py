"""Local reviews: `manage.py review` of a checkout (review.py), of a remote pull request
(remote.py), and its reports as text, JSON or SARIF."""
