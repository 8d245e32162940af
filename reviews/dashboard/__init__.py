"""The dashboard: every run, review and finding (views.py, with its reads in
selectors.py), the figures (metrics.py for /metrics, charts.py), and the operator's
status page with /healthz and /livez (status.py)."""
