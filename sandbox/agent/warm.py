"""What every conversation of a model engine (a review's or a reply's) makes the same way,
made once by the local runner's fork server before it forks an engine
(sandbox/runners/forkserver.py): the TLS context the model SDKs' clients share
(`sdk_http_client`, sandbox/agent/conversation.py), so that no engine loads the CA
bundle (about 20 ms of CPU each).

Made from the server's environment, the scrubbed one its engines start from: an engine
whose SSL_CERT_FILE or SSL_CERT_DIR differs makes its own (the kept contexts are keyed
by them). Nothing of a run is here.
"""

from __future__ import annotations

from sandbox.agent.conversation import tls_context

tls_context()
