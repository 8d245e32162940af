"""The agent loop shared by the API engines: the model reads the checkout through the
read-only tools until it calls `submit_review`, within the reviewer's bounds.

1. Build the prompt (sandbox/prompt.py) and open a conversation with the provider.
2. Each step is one model call. Its tool calls run against the checkout; their results
   (or the refusal: a path outside the repository, a bad regex) go back to the model.
3. `submit_review` is checked against the `Submission` schema; an invalid submission is
   returned to the model with what is wrong, up to MAX_CORRECTIONS times, after which
   the findings are taken as they are (the validation gate records each malformed one).
4. Bounds: the step ceiling, the cost cap (token usage × the model's price) and the
   deadline. The last step asks the model to submit. A bound reached without a
   submission returns a result marked `incomplete`, with the reason.
5. Usage, cost, steps, duration and a bounded transcript come back with the result.

Provider failures (a refused key, an unknown model, the API down after the SDK's own
retries) are raised as `ProviderError` by the provider adapters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from sandbox.agent.tools import SPECS, SUBMIT, ToolError, Tools, ToolSpec
from sandbox.contract import (
    MAX_TRANSCRIPT,
    ReviewJob,
    ReviewResult,
    ReviewSummary,
    Submission,
    TranscriptEntry,
    Usage,
)
from sandbox.prompt import Prompt, review_prompt

MAX_CORRECTIONS = 3
MAX_OUTPUT_TOKENS = 16_000
TRANSCRIPT_TEXT = 2_000
DEADLINE_MARGIN = 20  # seconds kept to hand the result back before the sandbox's limit
NUDGE = (
    "Use the tools to read what you need, then call `submit_review` to finish "
    "(an empty findings list is fine)."
)
LAST_STEP = "This is your last step: call `submit_review` now with what you have found."


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
    """One provider's side of the loop: it keeps the messages in its own dialect."""

    def send(self, *, timeout: float, force: str | None = None) -> Turn: ...

    def answer(self, results: list[Result], note: str = "") -> None: ...

    def say(self, text: str) -> None: ...


class ConversationFactory(Protocol):
    def __call__(
        self,
        job: ReviewJob,
        prompt: Prompt,
        tools: tuple[ToolSpec, ...],
        env: Mapping[str, str] | None = None,
    ) -> Conversation: ...


@dataclass
class Transcript:
    entries: list[TranscriptEntry] = field(default_factory=list)
    dropped: int = 0

    def add(self, kind: str, content: str = "", *, name: str = "", is_error: bool = False) -> None:
        if len(self.entries) >= MAX_TRANSCRIPT - 1:
            self.dropped += 1
            return
        if len(content) > TRANSCRIPT_TEXT:
            content = (
                content[:TRANSCRIPT_TEXT] + f"… ({len(content) - TRANSCRIPT_TEXT} more characters)"
            )
        self.entries.append(
            TranscriptEntry(kind=kind, name=name, content=content, is_error=is_error)
        )

    def final(self) -> list[TranscriptEntry]:
        if self.dropped:
            return [
                *self.entries,
                TranscriptEntry(kind="note", content=f"{self.dropped} more entries not kept"),
            ]
        return self.entries


def validation_message(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors()[:20]:
        where = ".".join(str(part) for part in error["loc"]) or "(the input)"
        lines.append(f"- {where}: {error['msg']}")
    more = len(exc.errors()) - 20
    if more > 0:
        lines.append(f"- … and {more} more")
    return (
        "The submission does not match the schema; fix these and call submit_review again:\n"
        + "\n".join(lines)
    )


def agent_review(
    job: ReviewJob,
    root: Path,
    *,
    engine: str,
    conversation: ConversationFactory,
    clock=time.monotonic,
) -> ReviewResult:
    started = clock()
    deadline = started + max(job.limits.deadline_seconds - DEADLINE_MARGIN, 1)
    prompt = review_prompt(job)
    tools = Tools(root)
    chat = conversation(job, prompt, SPECS)
    transcript = Transcript()
    tokens = Tokens()
    steps = corrections = 0
    price = job.price
    if price is None and job.model:
        transcript.add("note", f"No price is known for {job.model}: its cost is counted as $0.")

    def cost() -> float:
        if price is None:
            return 0.0
        return price.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)

    def finish(
        submission: Submission | None, raw_findings: list | None = None, incomplete: str = ""
    ) -> ReviewResult:
        if incomplete:
            transcript.add("note", incomplete, is_error=True)
        findings = (
            raw_findings
            if raw_findings is not None
            else (
                [f.model_dump(mode="json", exclude_none=True) for f in submission.findings]
                if submission
                else []
            )
        )
        return ReviewResult(
            engine=engine,
            findings=findings,
            summary=submission.summary if submission else ReviewSummary(confidence=0),
            rulings=submission.rulings if submission else [],
            walkthrough=submission.walkthrough if submission else "",
            usage=Usage(
                input_tokens=tokens.input + tokens.cache_read + tokens.cache_write,
                output_tokens=tokens.output,
                cost_usd=round(cost(), 6),
                steps=steps,
                model=job.model,
                duration_seconds=round(clock() - started, 3),
            ),
            incomplete=incomplete,
            transcript=transcript.final(),
        )

    while True:
        if steps >= job.limits.steps:
            return finish(
                None,
                incomplete=f"stopped at the step ceiling ({job.limits.steps} model calls) before the review was submitted",
            )
        cap = job.limits.cost_cap_usd
        if cap is not None and price is not None and cost() >= cap:
            return finish(
                None,
                incomplete=f"stopped at the cost cap (${cap:.2f}; ${cost():.4f} spent) before the review was submitted",
            )
        remaining = deadline - clock()
        if remaining <= 0:
            return finish(
                None,
                incomplete=f"stopped at the deadline ({job.limits.deadline_seconds} s) before the review was submitted",
            )
        last = steps == job.limits.steps - 1
        turn = chat.send(timeout=min(remaining, 600), force=SUBMIT if last else None)
        steps += 1
        tokens.input += turn.tokens.input
        tokens.output += turn.tokens.output
        tokens.cache_read += turn.tokens.cache_read
        tokens.cache_write += turn.tokens.cache_write
        if turn.text:
            transcript.add("text", turn.text)

        if not turn.calls:
            if turn.stop == "max_tokens":
                transcript.add("note", "the answer was cut off at the output limit", is_error=True)
                chat.say(
                    "Your answer was cut off at the output limit. Be briefer, then call submit_review."
                )
            else:
                chat.say(LAST_STEP if steps == job.limits.steps - 1 else NUDGE)
            continue

        results: list[Result] = []
        submitted: Submission | None = None
        salvage: list | None = None
        for call in turn.calls:
            transcript.add("tool_call", _arguments_text(call), name=call.name)
            if call.name == SUBMIT:
                outcome = _submission(call, corrections)
                if isinstance(outcome, Submission):
                    submitted = outcome
                    results.append(Result(call, "Review received."))
                elif isinstance(outcome, list):
                    salvage = outcome
                    results.append(Result(call, "Review received."))
                elif outcome is None:
                    return finish(
                        None,
                        incomplete=f"the model's submission still did not match the schema after {MAX_CORRECTIONS} corrections",
                    )
                else:
                    corrections += 1
                    results.append(Result(call, outcome, is_error=True))
                    transcript.add("tool_result", outcome, name=call.name, is_error=True)
                continue
            try:
                if call.error:
                    raise ToolError(call.error)
                content, is_error = tools.call(call.name, call.arguments), False
            except ToolError as exc:
                content, is_error = str(exc), True
            except OSError as exc:  # a file vanished or is unreadable: the model may try another
                content, is_error = f"Could not read it: {exc.strerror or exc}", True
            results.append(Result(call, content, is_error))
            transcript.add("tool_result", content, name=call.name, is_error=is_error)
        if submitted is not None:
            return finish(submitted)
        if salvage is not None:
            transcript.add(
                "note",
                f"the submission was still invalid after {MAX_CORRECTIONS} corrections; its findings were taken as they are",
                is_error=True,
            )
            return finish(None, raw_findings=salvage)
        chat.answer(results, note=LAST_STEP if steps == job.limits.steps - 1 else "")


def _submission(call: Call, corrections: int) -> Submission | list | str | None:
    """A valid Submission; the error to send back while corrections remain; after that,
    the findings as they are (a list of objects), or None when there are none to take."""
    if call.error:
        if corrections < MAX_CORRECTIONS:
            return f"The submission's arguments are not valid JSON ({call.error}); call submit_review again."
        return None
    try:
        return Submission.model_validate(call.arguments)
    except ValidationError as exc:
        if corrections < MAX_CORRECTIONS:
            return validation_message(exc)
        raw = call.arguments.get("findings") if isinstance(call.arguments, dict) else None
        findings = [f for f in raw if isinstance(f, dict)] if isinstance(raw, list) else []
        return findings or None


def _arguments_text(call: Call) -> str:
    if call.error:
        return f"(invalid arguments: {call.error})"
    try:
        return json.dumps(call.arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(call.arguments)
