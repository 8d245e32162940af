"""The GitHub Actions runner, Tasuku's side: dispatching a run's workflow and following
it (workflow.py), the OIDC tokens that prove which workflow run asks (oidc.py), and the
two API endpoints the runner calls for its job and with its result (api.py)."""
