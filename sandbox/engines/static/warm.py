"""What every static review loads the same way, loaded once by the local runner's fork
server before it forks an engine (sandbox/runners/forkserver.py): detect-secrets, the
classes of its detectors and their compiled patterns, and what it imports (requests);
and each installed checker's `--version` (a review asks again only a program replaced
since: `common.version_of`).
Each review's engine found none of it loaded and spent most of its CPU importing it:
`benchmarks/engine_start.py` measures the difference.

Nothing of a run is here: no file, no path, no setting a review changes (each engine
sets detect-secrets' settings for itself, in its own process).
"""

from __future__ import annotations

import contextlib
import importlib
import tempfile
from pathlib import Path

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

from sandbox.engines.static.common import version_of
from sandbox.engines.static.tools import tool

# What `secrets.check` imports when it runs (detect-secrets' scan, its collection and its
# settings; `requests` with them).
LOADED = ("detect_secrets", "detect_secrets.core.secrets_collection", "detect_secrets.settings")
CHECKERS = ("ruff", "shellcheck", "oxlint", "zizmor", "hadolint")

for _module in LOADED:
    importlib.import_module(_module)

# Imports every detector's module and compiles its patterns; the result is cached by
# detect-secrets (lru_cache) and reused by each forked review.
get_mapping_from_secret_type_to_class()

for _name in CHECKERS:
    with contextlib.suppress(RuntimeError):  # not installed: a review says so if it needs it
        version_of(_name, tool(_name), Path(tempfile.gettempdir()))
