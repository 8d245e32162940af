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
    return AgentReview(
        job,
        root,
        engine=engine,
        conversation=conversation,
        clock=clock,
        connector_client=connector_client,
    ).run()


class AgentReview:
    """One review's loop, in named phases: set up (the prompt, the tools, the
    conversation), then steps until a bound is reached or the review is submitted —
    each step asks the model (`_ask`) and answers its calls (`_answer`) — and the result
    (`_result`)."""

    def __init__(
        self,
        job: ReviewJob,
        root: Path,
        *,
        engine: str,
        conversation: ConversationFactory,
        clock,
        connector_client: ConnectorClient | None,
    ) -> None:
        self.clock = clock
        self.started = clock()
        self.engine = engine
        self.deadline = self.started + max(job.limits.deadline_seconds - DEADLINE_MARGIN, 1)
        client = connector_client or ConnectorClient.from_environment()
        job, unreachable = connectors_reachable(job, client)
        self.job = job
        # A later pass continues the previous pass's conversation when it can.
        earlier_messages, fresh_because = resumable(job, engine)
        self.continued = job.resume.boundaries if earlier_messages and job.resume else None
        prompt = self.prompt = review_prompt(job, continued=self.continued)
        self.tools = Tools(
            root,
            skills=job.skill_documents,
            web=web_tools(job, prompt),
            secondaries=secondary_trees(job, root),
        )
        self.connectors = (
            ConnectorTools(
                job.connectors,
                client,
                boundary=prompt.boundary,
                max_calls=job.limits.connector_calls,
            )
            if job.connectors and client is not None
            else None
        )
        self.budget = Budget(job.limits.cost_cap_usd)
        self.explorers = (
            Dispatcher(
                job, self.tools, conversation, self.budget, deadline=self.deadline, clock=clock
            )
            if job.explorers
            else None
        )
        specs = (
            *self.tools.specs,
            *([self.explorers.spec] if self.explorers else []),
            *(self.connectors.specs if self.connectors else []),
            SUBMIT_SPEC,
        )
        self.tools.elsewhere = tuple(s.name for s in specs if s.name not in self.tools.handlers)
        self.chat = (
            conversation(job, prompt, specs, resume=earlier_messages)
            if earlier_messages
            else conversation(job, prompt, specs)
        )
        self.price = job.price
        # The first call sends the continued conversation too: its cost is held for it.
        pending = prompt_chars(prompt, specs) + len(json.dumps(earlier_messages or []))
        self.meter = Meter(self.price, job.limits.max_output_tokens, pending_chars=pending)
        self.transcript = Transcript()
        if earlier_messages:
            self.transcript.add(
                "note",
                f"Continued the previous pass's conversation ({len(earlier_messages)} messages).",
            )
        elif fresh_because:
            self.transcript.add("note", f"A fresh start: {fresh_because}.")
        self.tokens = Tokens()
        self.steps = self.corrections = 0
        if self.price is None and job.model:
            self.transcript.add(
                "note", f"No price is known for {job.model}: its cost is counted as $0."
            )
        if unreachable:
            self.transcript.add("note", unreachable, is_error=True)

    def run(self) -> ReviewResult:
        while True:
            if self.steps >= self.job.limits.steps:
                return self._result(
                    None,
                    incomplete=(
                        f"stopped at the step ceiling ({self.job.limits.steps} model calls) "
                        "before the review was submitted"
                    ),
                )
            remaining = self.deadline - self.clock()
            if remaining <= 0:
                return self._result(None, incomplete=self._at_deadline)
            turn = self._ask(remaining)
            if isinstance(turn, ReviewResult):
                return turn
            if not turn.calls:
                if turn.stop == "max_tokens":
                    self.transcript.add(
                        "note", "the answer was cut off at the output limit", is_error=True
                    )
                    self._say(CUT_OFF)
                else:
                    self._say(LAST_STEP if self.steps == self.job.limits.steps - 1 else NUDGE)
                continue
            ended = self._answer(turn)
            if ended is not None:
                return ended

    @property
    def _at_deadline(self) -> str:
        return (
            f"{INCOMPLETE_AT_DEADLINE} ({self.job.limits.deadline_seconds} s) before the review "
            "was submitted"
        )

    def _ask(self, remaining: float) -> Turn | ReviewResult:
        """One model call (`remaining`: seconds to the deadline), its worst cost held
        first: the turn, or the result when the cost cap or the deadline ends it."""
        worst = self.meter.worst_next()
        if not self.budget.reserve(worst):
            return self._result(
                None,
                incomplete=(
                    "stopped at the cost cap before the review was submitted "
                    f"({self.budget.refusal(worst)})"
                ),
            )
        last = self.steps == self.job.limits.steps - 1
        asked = self.clock()
        try:
            turn = self.chat.send(timeout=min(remaining, 600), force=SUBMIT if last else None)
        except ProviderError as exc:
            self.budget.release(worst)
            # A call cut off because the review's own time ran out is the deadline, not
            # an unreachable provider: retrying it would only run out of time again.
            if (
                exc.code == "provider-unavailable"
                and self.clock() >= self.deadline - DEADLINE_SLACK
            ):
                return self._result(None, incomplete=self._at_deadline)
            raise
        except BaseException:  # the reserved cost is given back however the call ended; re-raised
            self.budget.release(worst)
            raise
        self.budget.settle(worst, call_cost(self.price, turn.tokens))
        progress.emit(
            "model",
            step=self.steps + 1,
            input=turn.tokens.input + turn.tokens.cache_read + turn.tokens.cache_write,
            output=turn.tokens.output,
            seconds=round(self.clock() - asked, 2),
        )
        self.steps += 1
        self.tokens.add(turn.tokens)
        self.meter.sent(turn.tokens)
        if turn.text:
            self.transcript.add("text", turn.text)
        return turn

    def _answer(self, turn: Turn) -> ReviewResult | None:
        """Run the turn's calls and answer them; the result once the review is submitted
        (or its submission given up on), else None."""
        results: list[Result] = []
        submitted: Submission | None = None
        salvage: list | None = None
        for call in turn.calls:
            if self.connectors is not None and call.name in self.connectors:
                results.append(self._connector_call(self.connectors, call))
                continue
            self.transcript.add("tool_call", _arguments_text(call), name=call.name)
            if call.name == SUBMIT:
                outcome = _submission(call, self.corrections)
                if isinstance(outcome, Submission):
                    submitted = outcome
                    results.append(Result(call, "Review received."))
                elif isinstance(outcome, list):
                    salvage = outcome
                    results.append(Result(call, "Review received."))
                elif outcome is None:
                    return self._result(
                        None,
                        incomplete=(
                            "the model's submission still did not match the schema after "
                            f"{MAX_CORRECTIONS} corrections"
                        ),
                    )
                else:
                    self.corrections += 1
                    results.append(Result(call, outcome, is_error=True))
                    self.transcript.add("tool_result", outcome, name=call.name, is_error=True)
                continue
            results.append(self._tool_call(call, results))
        if submitted is not None:
            return self._result(submitted)
        if salvage is not None:
            self.transcript.add(
                "note",
                f"the submission was still invalid after {MAX_CORRECTIONS} corrections; its "
                "findings were taken as they are",
                is_error=True,
            )
            return self._result(None, raw_findings=salvage)
        note = LAST_STEP if self.steps == self.job.limits.steps - 1 else ""
        self.chat.answer(results, note=note)
        self.meter.added(sum(len(r.content) + 40 for r in results) + len(note))
        return None

    def _connector_call(self, connectors: ConnectorTools, call: Call) -> Result:
        # One "connector" entry says it all: the input summarised, how it went, and the
        # start of the answer.
        outcome = connectors.call(call.name, call.arguments, call.error)
        self.transcript.add(
            "connector",
            outcome.content,
            name=call.name,
            is_error=outcome.is_error,
            connector=outcome.record,
        )
        return Result(call, outcome.content, outcome.is_error)

    def _tool_call(self, call: Call, answered: list[Result]) -> Result:
        """A checkout tool or the explorers (`answered`: this turn's results so far, sent
        with the next call)."""
        began = self.clock()
        try:
            if call.error:
                raise ToolError(call.error)
            if call.name == DISPATCH and self.explorers is not None:
                # The reviewer's next call will carry the reports: it stays affordable.
                held = self.meter.worst_next(
                    sum(len(r.content) for r in answered)
                    + self.explorers.config.per_call * (self.explorers.config.report_chars + 500)
                )
                # Each explorer has its own transcript entry.
                return Result(call, self.explorers.dispatch(call.arguments, held, self.transcript))
            content, is_error = self.tools.call(call.name, call.arguments), False
        except ToolError as exc:
            content, is_error = str(exc), True
        except OSError as exc:  # a file vanished or is unreadable: the model may try another
            content, is_error = f"Could not read it: {exc.strerror or exc}", True
        progress.emit(
            "tool",
            name=call.name,
            args=progress.arguments_summary(call.arguments),
            seconds=round(self.clock() - began, 2),
            error=is_error,
        )
        self.transcript.add("tool_result", content, name=call.name, is_error=is_error)
        return Result(call, content, is_error)

    def _say(self, text: str) -> None:
        self.chat.say(text)
        self.meter.added(len(text))

    def _result(
        self, submission: Submission | None, raw_findings: list | None = None, incomplete: str = ""
    ) -> ReviewResult:
        if incomplete:
            self.transcript.add("note", incomplete, is_error=True)
        if raw_findings is not None:
            findings = raw_findings
        elif submission:
            findings = [f.model_dump(mode="json", exclude_none=True) for f in submission.findings]
        else:
            findings = []
        explorers, connectors, tokens = self.explorers, self.connectors, self.tokens
        explored = explorers.usage if explorers and explorers.usage.explorers else None
        if explored is not None:
            explored = explored.model_copy(update={"cost_usd": round(explored.cost_usd, 6)})
        return ReviewResult(
            engine=self.engine,
            findings=findings,
            summary=submission.summary if submission else ReviewSummary(confidence=0),
            rulings=submission.rulings if submission else [],
            walkthrough=submission.walkthrough if submission else "",
            usage=Usage(
                input_tokens=tokens.prompt + (explored.input_tokens if explored else 0),
                output_tokens=tokens.output + (explored.output_tokens if explored else 0),
                cost_usd=round(
                    call_cost(self.price, tokens) + (explored.cost_usd if explored else 0), 6
                ),
                steps=self.steps,
                model=self.job.model,
                duration_seconds=round(self.clock() - self.started, 3),
                explorers=explored,
                connectors=connectors.usage if connectors and connectors.usage.calls else None,
            ),
            incomplete=incomplete,
            transcript=self.transcript.final(),
            conversation=_kept(
                self.chat,
                self.engine,
                self.job.model,
                (*(self.continued or ()), self.prompt.boundary),
            ),
        )


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
