"""Reviewer engines. Each takes a `ReviewJob` and the sanitised checkout and returns a
`ReviewResult`; they run inside a runner (sandbox/runners), never in the web or worker
process itself.

`REGISTRY` is the one table of what each engine is: the function a runner calls and the
provider whose API it talks to (the static engine talks to none). Everything else that
depends on the engine — a reviewer's provider, the one key and server an engine is
given, the conversation a model triage holds, the variables the Actions runner passes
on — is read from it. It imports nothing (no Django, no SDK): the Actions runner and the
sandboxed engine process read it too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    """Whose API a model engine calls."""

    name: str
    key_variable: str  # the API key's setting and environment variable
    url_variable: str  # the server's (a gateway, an OpenAI-compatible server)
    conversation: str  # "module:Class" of its API conversation (the agent loop, triage)
    sdk: str  # the vendor's SDK the conversation imports when it starts (seconds of it)

    @property
    def variables(self) -> tuple[str, str]:
        return (self.key_variable, self.url_variable)


@dataclass(frozen=True)
class EngineFacts:
    name: str
    entry: str  # "module:function" that `python -m sandbox.run_engine <name>` calls
    provider: Provider | None = None  # None: the engine calls no model
    # Runs Tasuku's agent loop with Tasuku's tools (explorers, the symbol index, web
    # research); the CLI engines run their vendor's loop instead, with the reviewer's
    # skills and connectors but not those.
    tasuku_tools: bool = False
    # Modules its runs all load the same way beyond its entry's own imports (what a
    # checker imports when it runs), for the fork server to load once.
    warm: tuple[str, ...] = ()

    @property
    def model_engine(self) -> bool:
        return self.provider is not None

    @property
    def connectors(self) -> bool:
        """Offers the reviewer's connectors: every model engine does (the CLI engines
        through a local MCP server, sandbox/engines/cli/extras.py)."""
        return self.model_engine

    @property
    def provider_name(self) -> str:
        """The provider's name, or "" for an engine that calls no model."""
        return self.provider.name if self.provider else ""

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment variables the engine may be given: its provider's key and
        server, and nothing else."""
        return self.provider.variables if self.provider else ()

    @property
    def modules(self) -> tuple[str, ...]:
        """What the engine imports before it does anything (the local runner's fork
        server imports them once: sandbox/runners/forkserver.py)."""
        entry = (self.entry.split(":")[0], *self.warm)
        if self.provider is None or not self.tasuku_tools:
            return entry
        return (*entry, self.provider.conversation.split(":")[0], self.provider.sdk)


ANTHROPIC = Provider(
    name="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    url_variable="ANTHROPIC_BASE_URL",
    conversation="sandbox.agent.anthropic_api:AnthropicConversation",
    sdk="anthropic",
)
OPENAI = Provider(
    name="openai",
    key_variable="OPENAI_API_KEY",
    url_variable="OPENAI_BASE_URL",
    conversation="sandbox.agent.openai_api:OpenAIConversation",
    sdk="openai",
)
PROVIDERS = {p.name: p for p in (ANTHROPIC, OPENAI)}
# What a conversation with a model makes the same way each time (its SDK client's TLS
# context), for the fork server to make once.
WARM_AGENT = ("sandbox.agent.warm",)

REGISTRY = {
    e.name: e
    for e in (
        EngineFacts(
            "static", "sandbox.engines.static:review", warm=("sandbox.engines.static.warm",)
        ),
        EngineFacts("anthropic", "sandbox.agent.anthropic_api:review", ANTHROPIC, True, WARM_AGENT),
        EngineFacts("openai", "sandbox.agent.openai_api:review", OPENAI, True, WARM_AGENT),
        EngineFacts("claude-code", "sandbox.engines.cli:review_claude_code", ANTHROPIC),
        EngineFacts("codex", "sandbox.engines.cli:review_codex", OPENAI),
    )
}

# Engine name → the "module:function" a runner's `sandbox.run_engine` calls.
ENGINES = {name: facts.entry for name, facts in REGISTRY.items()}


def modules_of(program: str, engine: str) -> tuple[str, ...]:
    """What `python -m <program> <engine>` imports before it starts: a review
    (`sandbox.run_engine`) imports its engine's; a reply (`sandbox.run_reply`), its
    provider's conversation and SDK."""
    facts = REGISTRY.get(engine)
    if facts is None:
        return ()
    if program == "sandbox.run_reply" and facts.provider is not None:
        provider = facts.provider
        return (
            "sandbox.agent.reply", provider.conversation.split(":")[0], provider.sdk, *WARM_AGENT
        )  # fmt: skip
    return facts.modules if program == "sandbox.run_engine" else ()
