"""Connectors: tools an operator defines that let a model reviewer ask a system the team
trusts (a tracker, a runbook service, GitHub's issues), with Tasuku holding the
credential and making every call (docs/reviewers.md, *Connectors*).

- `models.py`: the `Connector` row (an HTTP endpoint template with its sealed credential,
  or a built-in kind that asks GitHub through the gateway); reviewers are allowed
  connectors one by one (`Reviewer.connectors`).
- `templates.py`: filling the endpoint's placeholders from the validated input.
- `outbound.py`: the guarded HTTP call (http(s) only, the allowed hosts, no redirect
  elsewhere, a timeout, a size cap).
- `github_issue.py`: the built-in `github_issue` connector.
- `calls.py`: one call, end to end: the checks, the call, the bounded answer
  (`connector_call`), and what a job offers (`connector_tools`).

The engine never sees an endpoint or a credential: it sends its calls back to Tasuku
(sandbox/connectors.py; reviews/engines/connectors.py and reviews/actions/connectors.py take
them).
"""
