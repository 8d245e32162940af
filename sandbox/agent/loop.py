"""The agent loop shared by the API engines: the model reads the checkout through the
read-only tools until it calls `submit_review`, within the reviewer's bounds.

1. Build the prompt (sandbox/prompt.py) and open a conversation with the provider. The
   tools offered depend on the job: the checkout tools and the symbol index always,
   `load_skill` with named skills, `dispatch_explorers` with explorers, web research
   when the reviewer allows it, and each connector the reviewer may use when the
   runner gave the engine its way back to Tasuku (sandbox/connectors.py).
2. Each step is one model call. Its tool calls run against the checkout; their results
   (or the refusal: a path outside the repository, a bad regex) go back to the model.
   A connector call goes to Tasuku, which makes it; its answer (or why there is none)
   goes back to the model as data, and on the transcript as a "connector" entry.
3. `submit_review` is checked against the `Submission` schema; an invalid submission is
   returned to the model with what is wrong, up to MAX_CORRECTIONS times, after which
   the findings are taken as they are (the validation gate records each malformed one).
4. Bounds: the step ceiling, the cost cap and the deadline. The cost cap is held before
   each call (sandbox/agent/budget.py): a call whose worst case could pass it is not
   made. The last step asks the model to submit. A bound reached without a submission
   returns a result marked `incomplete`, with the reason.
5. Usage, cost (the explorers' apart), steps, duration, the connector calls and a
   bounded transcript come back with the result.

Provider failures (a refused key, an unknown model, the API down after the SDK's own
retries) are raised as `ProviderError` by the provider adapters.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

from pydantic import ValidationError

from sandbox import progress
from sandbox.agent.budget import Budget, Meter, call_cost
from sandbox.agent.conversation import (
    Call,
    Conversation,
    ConversationFactory,
    Result,
    Tokens,
    Transcript,
    Turn,
)
from sandbox.agent.explorers import DISPATCH, Dispatcher
from sandbox.agent.resume import CLOSING, conversation_kept, resumable
from sandbox.agent.tools import SUBMIT, SUBMIT_SPEC, ToolError, Tools, ToolSpec
from sandbox.agent.tools.checkout import secondary_trees
from sandbox.agent.tools.connectors import ConnectorTools
from sandbox.connectors import ConnectorClient
from sandbox.contract import (
    INCOMPLETE_AT_DEADLINE,
    RESERVED_TOOL_NAMES,
    ReviewJob,
    ReviewResult,
    ReviewSummary,
    Submission,
    Usage,
)
from sandbox.errors import ProviderError
from sandbox.prompt import Prompt, review_prompt

__all__ = [
    "Call",
    "Conversation",
    "ConversationFactory",
    "Result",
    "Tokens",
    "Transcript",
    "Turn",
    "agent_review",
]

MAX_CORRECTIONS = 3
DEADLINE_MARGIN = 20  # seconds kept to hand the result back before the sandbox's limit
# A call whose timeout was the time left ends a little before the deadline (the
# transport's clock is not the loop's): within this many seconds of it, it ran out of time.
DEADLINE_SLACK = 0.5
NUDGE = (
    "Use the tools to read what you need, then call `submit_review` to finish "
    "(an empty findings list is fine)."
)
LAST_STEP = "This is your last step: call `submit_review` now with what you have found."
CUT_OFF = "Your answer was cut off at the output limit. Be briefer, then call submit_review."


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


def web_tools(job: ReviewJob, prompt: Prompt):
    """The web research tools the job allows (None: off), from its provider class."""
    if job.web is None:
        return None
    from sandbox.agent.tools.web import WebTools

    # "module:Class", or the dotted path "module.Class".
    module, _, name = job.web.provider.rpartition(":" if ":" in job.web.provider else ".")
    provider = getattr(importlib.import_module(module), name)(search_url=job.web.search_url)
    return WebTools(provider, boundary=prompt.boundary, config=job.web)


def connectors_reachable(job: ReviewJob, client: ConnectorClient | None) -> tuple[ReviewJob, str]:
    """The job with only the connectors the engine can offer, and a note on any it
    cannot: none without a way back to Tasuku (a runner that gives none), and none
    named like one of the agent's own tools."""
    if not job.connectors:
        return job, ""
    if client is None:
        names = ", ".join(c.name for c in job.connectors)
        note = f"Connectors not offered ({names}): this runner gave the engine no way to Tasuku."
        return job.model_copy(update={"connectors": ()}), note
    shadowing = [c.name for c in job.connectors if c.name in RESERVED_TOOL_NAMES]
    if not shadowing:
        return job, ""
    kept = tuple(c for c in job.connectors if c.name not in RESERVED_TOOL_NAMES)
    note = f"Connectors not offered ({', '.join(shadowing)}): named like one of the agent's tools."
    return job.model_copy(update={"connectors": kept}), note


def _kept(chat, engine: str, model: str, boundaries: tuple[str, ...]):
    """The conversation to keep for the next pass (None: this adapter keeps none)."""
    saved = getattr(chat, "saved", None)
    if saved is None:
        return None
    return conversation_kept(engine, model, saved(CLOSING), boundaries)


def prompt_chars(prompt: Prompt, specs: tuple[ToolSpec, ...]) -> int:
    described = json.dumps([[s.name, s.description, s.input_schema] for s in specs])
    return len(prompt.system) + len(prompt.user) + len(described)


def agent_review(
    job: ReviewJob,
    root: Path,
    *,
    engine: str,
    conversation: ConversationFactory,
    clock=time.monotonic,
    connector_client: ConnectorClient | None = None,
) -> ReviewResult:
    """`connector_client`: the way back to Tasuku for connector calls (default: the one
    the runner put in the environment, if any)."""
    started = clock()
    deadline = started + max(job.limits.deadline_seconds - DEADLINE_MARGIN, 1)
    client = connector_client or ConnectorClient.from_environment()
    job, unreachable = connectors_reachable(job, client)
    # A later pass continues the previous pass's conversation when it can.
    earlier_messages, fresh_because = resumable(job, engine)
    continued = job.resume.boundaries if earlier_messages and job.resume else None
    prompt = review_prompt(job, continued=continued)
    tools = Tools(
        root,
        skills=job.skill_documents,
        web=web_tools(job, prompt),
        secondaries=secondary_trees(job, root),
    )
    connectors = (
        ConnectorTools(
            job.connectors, client, boundary=prompt.boundary, max_calls=job.limits.connector_calls
        )
        if job.connectors and client is not None
        else None
    )
    budget = Budget(job.limits.cost_cap_usd)
    explorers = (
        Dispatcher(job, tools, conversation, budget, deadline=deadline, clock=clock)
        if job.explorers
        else None
    )
    specs = (
        *tools.specs,
        *([explorers.spec] if explorers else []),
        *(connectors.specs if connectors else []),
        SUBMIT_SPEC,
    )
    tools.elsewhere = tuple(s.name for s in specs if s.name not in tools.handlers)
    chat = (
        conversation(job, prompt, specs, resume=earlier_messages)
        if earlier_messages
        else conversation(job, prompt, specs)
    )
    price = job.price
    # The first call sends the continued conversation too: its cost is held for it.
    pending = prompt_chars(prompt, specs) + len(json.dumps(earlier_messages or []))
    meter = Meter(price, job.limits.max_output_tokens, pending_chars=pending)
    transcript = Transcript()
    if earlier_messages:
        transcript.add(
            "note",
            f"Continued the previous pass's conversation ({len(earlier_messages)} messages).",
        )
    elif fresh_because:
        transcript.add("note", f"A fresh start: {fresh_because}.")
    tokens = Tokens()
    steps = corrections = 0
    if price is None and job.model:
        transcript.add("note", f"No price is known for {job.model}: its cost is counted as $0.")
    if unreachable:
        transcript.add("note", unreachable, is_error=True)

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
        explored = explorers.usage if explorers and explorers.usage.explorers else None
        if explored is not None:
            explored = explored.model_copy(update={"cost_usd": round(explored.cost_usd, 6)})
        return ReviewResult(
            engine=engine,
            findings=findings,
            summary=submission.summary if submission else ReviewSummary(confidence=0),
            rulings=submission.rulings if submission else [],
            walkthrough=submission.walkthrough if submission else "",
            usage=Usage(
                input_tokens=tokens.prompt + (explored.input_tokens if explored else 0),
                output_tokens=tokens.output + (explored.output_tokens if explored else 0),
                cost_usd=round(
                    call_cost(price, tokens) + (explored.cost_usd if explored else 0), 6
                ),
                steps=steps,
                model=job.model,
                duration_seconds=round(clock() - started, 3),
                explorers=explored,
                connectors=connectors.usage if connectors and connectors.usage.calls else None,
            ),
            incomplete=incomplete,
            transcript=transcript.final(),
            conversation=_kept(chat, engine, job.model, (*(continued or ()), prompt.boundary)),
        )

    def say(text: str) -> None:
        chat.say(text)
        meter.added(len(text))

    while True:
        if steps >= job.limits.steps:
            return finish(
                None,
                incomplete=f"stopped at the step ceiling ({job.limits.steps} model calls) before the review was submitted",
            )
        remaining = deadline - clock()
        at_deadline = (
            f"{INCOMPLETE_AT_DEADLINE} ({job.limits.deadline_seconds} s) before the review was "
            "submitted"
        )
        if remaining <= 0:
            return finish(None, incomplete=at_deadline)
        worst = meter.worst_next()
        if not budget.reserve(worst):
            return finish(
                None,
                incomplete=f"stopped at the cost cap before the review was submitted ({budget.refusal(worst)})",
            )
        last = steps == job.limits.steps - 1
        asked = clock()
        try:
            turn = chat.send(timeout=min(remaining, 600), force=SUBMIT if last else None)
        except ProviderError as exc:
            budget.release(worst)
            # A call cut off because the review's own time ran out is the deadline, not
            # an unreachable provider: retrying it would only run out of time again.
            if exc.code == "provider-unavailable" and clock() >= deadline - DEADLINE_SLACK:
                return finish(None, incomplete=at_deadline)
            raise
        except BaseException:  # the reserved cost is given back however the call ended; re-raised
            budget.release(worst)
            raise
        budget.settle(worst, call_cost(price, turn.tokens))
        progress.emit(
            "model",
            step=steps + 1,
            input=turn.tokens.input + turn.tokens.cache_read + turn.tokens.cache_write,
            output=turn.tokens.output,
            seconds=round(clock() - asked, 2),
        )
        steps += 1
        tokens.add(turn.tokens)
        meter.sent(turn.tokens)
        if turn.text:
            transcript.add("text", turn.text)

        if not turn.calls:
            if turn.stop == "max_tokens":
                transcript.add("note", "the answer was cut off at the output limit", is_error=True)
                say(CUT_OFF)
            else:
                say(LAST_STEP if steps == job.limits.steps - 1 else NUDGE)
            continue

        results: list[Result] = []
        submitted: Submission | None = None
        salvage: list | None = None
        for call in turn.calls:
            if connectors is not None and call.name in connectors:
                # One "connector" entry says it all: the input summarised, how it went,
                # and the start of the answer.
                outcome = connectors.call(call.name, call.arguments, call.error)
                results.append(Result(call, outcome.content, outcome.is_error))
                transcript.add(
                    "connector",
                    outcome.content,
                    name=call.name,
                    is_error=outcome.is_error,
                    connector=outcome.record,
                )
                continue
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
            began = clock()
            try:
                if call.error:
                    raise ToolError(call.error)
                if call.name == DISPATCH and explorers is not None:
                    # The reviewer's next call will carry the reports: it stays affordable.
                    held = meter.worst_next(
                        sum(len(r.content) for r in results)
                        + explorers.config.per_call * (explorers.config.report_chars + 500)
                    )
                    content = explorers.dispatch(call.arguments, held, transcript)
                    results.append(Result(call, content))
                    continue  # each explorer has its own transcript entry
                content, is_error = tools.call(call.name, call.arguments), False
            except ToolError as exc:
                content, is_error = str(exc), True
            except OSError as exc:  # a file vanished or is unreadable: the model may try another
                content, is_error = f"Could not read it: {exc.strerror or exc}", True
            progress.emit(
                "tool",
                name=call.name,
                args=progress.arguments_summary(call.arguments),
                seconds=round(clock() - began, 2),
                error=is_error,
            )
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
        note = LAST_STEP if steps == job.limits.steps - 1 else ""
        chat.answer(results, note=note)
        meter.added(sum(len(r.content) + 40 for r in results) + len(note))


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
