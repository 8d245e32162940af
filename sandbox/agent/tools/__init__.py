"""The model engines' tools, one implementation for every provider.

- `checkout.py`: the read-only tools over the checkout (`read_file`, `search_code`,
  `find_files`, `list_directory`) and `load_skill`; `resolution.py`: how `read_file`
  finds the file an import names;
- `symbols.py`: the symbol index (`find_symbol`, `symbol_references`, tree-sitter), and
  `traces.py` on it (`importers`, `call_trace`);
- `web.py`: web research (`web_search`, `fetch_url`), offered only when the reviewer
  allows it;
- `submit_review` finishes a review (its input is checked by the agent loop), and the
  loop adds `dispatch_explorers` (sandbox/agent/explorers.py).
"""

from __future__ import annotations

from sandbox.agent.tools.base import ToolError, ToolSpec, inline_refs
from sandbox.agent.tools.checkout import (
    CHECKOUT_SPECS,
    LIST_MAX,
    READ_MAX_LINES,
    SEARCH_MAX_RESULTS,
    Tools,
)
from sandbox.contract import Submission

SUBMIT = "submit_review"
SUBMIT_SPEC = ToolSpec(
    SUBMIT,
    "Submit the review: every finding, a summary, and a ruling on each earlier finding "
    "you could judge. This is the only way to finish; an empty findings list is a "
    "successful review.",
    inline_refs(Submission.model_json_schema()),
)
# The tools every review has (the others depend on the job).
SPECS: tuple[ToolSpec, ...] = (*CHECKOUT_SPECS, SUBMIT_SPEC)

__all__ = [
    "LIST_MAX",
    "READ_MAX_LINES",
    "SEARCH_MAX_RESULTS",
    "SPECS",
    "SUBMIT",
    "SUBMIT_SPEC",
    "ToolError",
    "ToolSpec",
    "Tools",
    "inline_refs",
]
