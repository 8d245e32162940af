"""The API engines' agent: read-only tools over the checkout, one loop, and an adapter
per provider (Anthropic Messages, OpenAI Chat Completions)."""
