"""What the agent loop, the explorers and triage say to a provider's adapter, and what
they keep of it: one model turn, its tool calls and tokens, and the transcript."""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandbox.agent.tools import ToolSpec
from sandbox.contract import (
    MAX_TRANSCRIPT,
    ConnectorRecord,
    ExplorerUsage,
    ReviewJob,
    TranscriptEntry,
)
from sandbox.errors import ProviderError
from sandbox.prompt import Prompt

TRANSCRIPT_TEXT = 2_000


def sdk_http_client(default_client: Any) -> Any:
    """The HTTP client a provider's SDK would make for itself (`default_client`: the SDK's
    `DefaultHttpxClient`, with its timeouts, connection limits and redirects), on a TLS
    context made once a process. The SDK's own client loads the CA bundle again each time
    (about 20 ms of CPU), and an engine makes several: triage's, the review's, each
    explorer's, the memory's. The context is the one the SDK would make — from
    SSL_CERT_FILE or SSL_CERT_DIR when set (the kept one is keyed by them), else the
    system's bundle. The SDK closes a client it was given only when told: the
    conversation that holds it closes it (`close_quietly`)."""
    return default_client(verify=tls_context())


def tls_context() -> ssl.SSLContext:
    """The process's TLS context for the model SDKs (made by the fork server before it
    forks an engine: sandbox/agent/warm.py)."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    import httpx2  # both SDKs' HTTP client: the context as they make it, once

    try:
        return httpx2.create_ssl_context()
    except (OSError, ssl.SSLError) as exc:
        # The SDK's own words would be a bare "No such file or directory".
        named = ", ".join(f"{k}={v}" for k, v in (("SSL_CERT_FILE", cafile),
                                                  ("SSL_CERT_DIR", capath)) if v)  # fmt: skip
        raise ProviderError(
            f"The CA bundle the engine's environment names ({named or 'the system bundle'}) "
            f"cannot be read: {exc}. Point it at a readable PEM bundle, or unset it.",
            permanent=True,
            code="provider-ca-bundle",
        ) from exc


def close_quietly(client: Any) -> None:
    """Close an SDK client whose HTTP client the conversation gave it, as the SDK closes
    its own when it is collected (an error then has nobody to tell); `None` (a
    conversation refused before it had one) is left alone."""
    if client is None:
        return
    # A finaliser: whatever closing raises has nobody to go to.
    with contextlib.suppress(Exception):
        client.close()


@dataclass
class Call:
    id: str
    name: str
    arguments: Any  # parsed JSON (a dict when well-formed)
    error: str = ""  # the arguments could not be parsed


@dataclass
class Tokens:
    input: int = 0  # not counting cached input
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def prompt(self) -> int:
        """Every input token of the call, cached or not: the size of the context sent."""
        return self.input + self.cache_read + self.cache_write

    def add(self, other: Tokens) -> None:
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write


@dataclass
class Turn:
    text: str
    calls: list[Call]
    stop: str  # "tool_use" | "end_turn" | "max_tokens" | provider-specific
    tokens: Tokens


@dataclass
class Result:
    call: Call
    content: str
    is_error: bool = False


class Conversation(Protocol):
    """One provider's side of the loop: it keeps the messages in its own dialect. Each
    turn may write at most `job.limits.max_output_tokens` (of the job it was made with)."""

    def send(self, *, timeout: float, force: str | None = None) -> Turn: ...

    def answer(self, results: list[Result], note: str = "") -> None: ...

    def say(self, text: str) -> None: ...

    def saved(self, closing: str) -> list[dict[str, Any]]:
        """The messages as the provider holds them, every open tool call answered with
        `closing`: what is kept for the next pass (sandbox/agent/resume.py)."""
        ...


class ConversationFactory(Protocol):
    def __call__(
        self,
        job: ReviewJob,
        prompt: Prompt,
        tools: tuple[ToolSpec, ...],
        env: Mapping[str, str] | None = None,
        *,
        resume: list[dict[str, Any]] | None = None,
    ) -> Conversation: ...


@dataclass
class Transcript:
    entries: list[TranscriptEntry] = field(default_factory=list)
    dropped: int = 0

    def add(
        self,
        kind: str,
        content: str = "",
        *,
        name: str = "",
        is_error: bool = False,
        usage: ExplorerUsage | None = None,
        connector: ConnectorRecord | None = None,
    ) -> None:
        if len(self.entries) >= MAX_TRANSCRIPT - 1:
            self.dropped += 1
            return
        if len(content) > TRANSCRIPT_TEXT:
            content = (
                content[:TRANSCRIPT_TEXT] + f"… ({len(content) - TRANSCRIPT_TEXT} more characters)"
            )
        self.entries.append(
            TranscriptEntry(
                kind=kind,
                name=name,
                content=content,
                is_error=is_error,
                usage=usage,
                connector=connector,
            )
        )

    def final(self) -> list[TranscriptEntry]:
        if self.dropped:
            return [
                *self.entries,
                TranscriptEntry(kind="note", content=f"{self.dropped} more entries not kept"),
            ]
        return self.entries
