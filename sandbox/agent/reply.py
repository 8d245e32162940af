"""A reply job: the model reviewer answers a person in one of its threads — `concede`
(with why) or `explain` — after reading the thread and, with the review's read-only
tools, the code at the pull request's head. Bounded by steps, tokens, cost and a
deadline; whatever goes wrong (the provider, a bound, an answer that is no answer) comes
back as `failure`, and the worker gives the thread its canned answer instead.

Runs where a review's engine runs (`python -I -m sandbox.run_reply <engine>`: a
`ReplyJob` on stdin, a `ReplyResult` on stdout). Imports nothing from Django.
"""

from __future__ import annotations

import time

from pydantic import ValidationError

from sandbox.agent.loop import ConversationFactory, Result, Tokens, Transcript, _arguments_text
from sandbox.agent.tools import SPECS, SUBMIT, ToolError, Tools, ToolSpec, inline_refs
from sandbox.contract import ReplyAnswer, ReplyJob, ReplyResult, Usage
from sandbox.errors import ProviderError
from sandbox.prompt import reply_prompt

REPLY_TOOL = "submit_reply"
MAX_CORRECTIONS = 1
NUDGE = "Call `submit_reply` with your decision (concede or explain) and its text."

REPLY_SPEC = ToolSpec(
    REPLY_TOOL,
    "Answer the person: `concede` (the finding does not hold; say why) or `explain` "
    "(answer them; say why it still holds). This is the only way to finish.",
    inline_refs(ReplyAnswer.model_json_schema()),
)
TOOLS = tuple(s for s in SPECS if s.name != SUBMIT) + (REPLY_SPEC,)


def agent_reply(
    job: ReplyJob, root, *, engine: str, conversation: ConversationFactory, clock=time.monotonic
) -> ReplyResult:
    started = clock()
    deadline = started + job.limits.deadline_seconds
    tools = Tools(root)
    transcript = Transcript()
    tokens = Tokens()
    steps = corrections = 0

    def cost() -> float:
        if job.price is None:
            return 0.0
        return job.price.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)

    def used() -> int:
        return tokens.input + tokens.cache_read + tokens.cache_write + tokens.output

    def finish(answer: ReplyAnswer | None = None, failure: str = "") -> ReplyResult:
        if failure:
            transcript.add("note", failure, is_error=True)
        return ReplyResult(
            engine=engine,
            decision=answer.decision if answer else "",
            text=answer.text if answer else "",
            failure=failure[:2000],
            usage=Usage(
                input_tokens=tokens.input + tokens.cache_read + tokens.cache_write,
                output_tokens=tokens.output,
                cost_usd=round(cost(), 6),
                steps=steps,
                model=job.model,
                duration_seconds=round(clock() - started, 3),
            ),
            transcript=transcript.final(),
        )

    try:
        chat = conversation(job, reply_prompt(job), TOOLS)  # type: ignore[arg-type]
        while True:
            if steps >= job.limits.steps:
                return finish(failure=f"no answer within {job.limits.steps} model calls")
            cap = job.limits.cost_cap_usd
            if cap is not None and job.price is not None and cost() >= cap:
                return finish(failure=f"stopped at the cost cap (${cap:.2f})")
            if used() >= job.max_tokens:
                return finish(failure=f"stopped at the token bound ({job.max_tokens} tokens)")
            remaining = deadline - clock()
            if remaining <= 0:
                return finish(failure=f"no answer within {job.limits.deadline_seconds} s")
            last = steps == job.limits.steps - 1
            turn = chat.send(timeout=min(remaining, 120), force=REPLY_TOOL if last else None)
            steps += 1
            tokens.input += turn.tokens.input
            tokens.output += turn.tokens.output
            tokens.cache_read += turn.tokens.cache_read
            tokens.cache_write += turn.tokens.cache_write
            if turn.text:
                transcript.add("text", turn.text)
            if not turn.calls:
                chat.say(NUDGE)
                continue
            results: list[Result] = []
            for call in turn.calls:
                transcript.add("tool_call", _arguments_text(call), name=call.name)
                if call.name == REPLY_TOOL:
                    try:
                        if call.error:
                            raise ValueError(call.error)
                        return finish(ReplyAnswer.model_validate(call.arguments))
                    except (ValidationError, ValueError) as exc:
                        if corrections >= MAX_CORRECTIONS:
                            return finish(failure=f"the model's answer was malformed: {exc}"[:500])
                        corrections += 1
                        said = f"That answer does not match the schema ({exc}); call submit_reply again."
                        results.append(Result(call, said[:2000], is_error=True))
                    continue
                try:
                    if call.error:
                        raise ToolError(call.error)
                    content, is_error = tools.call(call.name, call.arguments), False
                except ToolError as exc:
                    content, is_error = str(exc), True
                except OSError as exc:
                    content, is_error = f"Could not read it: {exc.strerror or exc}", True
                results.append(Result(call, content, is_error))
                transcript.add("tool_result", content, name=call.name, is_error=is_error)
            chat.answer(results, note=NUDGE if steps == job.limits.steps - 1 else "")
    except ProviderError as exc:
        return finish(failure=f"the model could not be asked: {exc}"[:2000])
