"""The API engines' agent: one loop (`loop.py`) with its cost budget (`budget.py`) and
explorers (`explorers.py`), the tools over the checkout (`tools/`), and an adapter per
provider (Anthropic Messages, OpenAI Chat Completions)."""
