"""`dispatch_explorers`: the reviewer sends subagents, on its fast model, to answer
questions about the checkout, and gets their short reports back as the tool's result.

Bounds: at most `per_call` explorers at once and `per_review` in all; each has a step
ceiling and writes at most EXPLORER_MAX_OUTPUT tokens a turn; each report is cut at
`report_chars`. Explorers have the read-only checkout tools only — never
`submit_review`, never `dispatch_explorers` (no recursion), no web, no skills. Their
calls reserve their worst case against the review's one `Budget` like the reviewer's,
and a dispatch first holds what the reviewer's next call may cost (with the reports in
it), so explorers can never leave the reviewer unable to submit.

They run concurrently, in threads: each waits on its model most of the time, and a
review's deadline is better spent on one round of waits than on several in a row. The
reports come back in the order they were asked for, whichever finished first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sandbox import progress
from sandbox.agent.budget import Budget, Meter, call_cost
from sandbox.agent.conversation import ConversationFactory, Result, Tokens, Transcript
from sandbox.agent.tools import ToolError, Tools, ToolSpec
from sandbox.contract import ExplorerUsage, ReviewJob
from sandbox.errors import StageError
from sandbox.prompt import explorer_prompt

DISPATCH = "dispatch_explorers"
REPORT = "submit_report"
EXPLORER_MAX_OUTPUT = 4_096
MAX_QUESTION = 1_000
LAST_STEP = "This is your last step: call `submit_report` now with what you have found."
NUDGE = "Use the tools to find the answer, then call `submit_report` with your report."

REPORT_SPEC = ToolSpec(
    REPORT,
    "Submit your report to the reviewer: the answer, with the path:line of what you read. "
    "This is the only way to finish.",
    {"type": "object", "properties": {"report": {"type": "string"}}, "required": ["report"]},
)


def dispatch_spec(per_call: int) -> ToolSpec:
    return ToolSpec(
        DISPATCH,
        f"Send up to {per_call} explorers at once, each with one question about the "
        "repository (and optionally where to look). Each reads the code on a faster model "
        "with the read-only tools and reports back briefly; their reports are this tool's "
        "result. Use them for wide questions that would take you many reads.",
        {
            "type": "object",
            "properties": {
                "explorers": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": per_call,
                    "items": {
                        "type": "object",
                        "properties": {
                            "question": {"type": "string"},
                            "area": {
                                "type": "string",
                                "description": "Files, folders or a subsystem to start from.",
                            },
                        },
                        "required": ["question"],
                    },
                }
            },
            "required": ["explorers"],
        },
    )


@dataclass
class Explored:
    question: str
    report: str = ""
    stopped: str = ""  # why it has no report (a bound, a failure)
    steps: int = 0
    tokens: Tokens = field(default_factory=Tokens)
    cost: float = 0.0
    read: list[str] = field(default_factory=list)  # its tool calls, briefly


class Dispatcher:
    """The explorers of one review."""

    def __init__(
        self,
        job: ReviewJob,
        tools: Tools,
        conversation: ConversationFactory,
        budget: Budget,
        *,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
        env: Mapping[str, str] | None = None,
    ) -> None:
        assert job.explorers is not None
        self.config = job.explorers
        self.max_output = min(job.limits.max_output_tokens, EXPLORER_MAX_OUTPUT)
        self.job = job.model_copy(
            update={
                "model": self.config.model,
                "limits": job.limits.model_copy(update={"max_output_tokens": self.max_output}),
            }
        )
        self.tools = tools
        self.conversation = conversation
        self.budget = budget
        self.deadline = deadline
        self.clock = clock
        self.env = env
        self.sent = 0
        self.usage = ExplorerUsage(model=self.config.model)

    @property
    def spec(self) -> ToolSpec:
        return dispatch_spec(self.config.per_call)

    def questions(self, arguments: Any) -> list[tuple[str, str]]:
        asked = arguments.get("explorers") if isinstance(arguments, dict) else None
        if not isinstance(asked, list) or not asked:
            raise ToolError("Give `explorers`: a list of {question, area}.")
        left = self.config.per_review - self.sent
        if len(asked) > self.config.per_call:
            raise ToolError(
                f"At most {self.config.per_call} explorers at once; you asked for {len(asked)}."
            )
        if len(asked) > left:
            raise ToolError(
                f"Only {left} of this review's {self.config.per_review} explorers are left"
                + ("; read the code yourself." if not left else f"; send {left} at most.")
            )
        out = []
        for item in asked:
            question = item.get("question") if isinstance(item, dict) else None
            if not isinstance(question, str) or not question.strip():
                raise ToolError("Each explorer needs a `question`.")
            area = item.get("area") or ""
            out.append((question.strip()[:MAX_QUESTION], str(area).strip()[:MAX_QUESTION]))
        return out

    def dispatch(self, arguments: Any, held_for_reviewer: float, transcript: Transcript) -> str:
        """Run the explorers asked for and return their reports. `held_for_reviewer` is
        what the reviewer's next call may cost: it stays held while they work."""
        asked = self.questions(arguments)
        if not self.budget.reserve(held_for_reviewer):
            raise ToolError(
                "Not enough of the review's cost cap is left to send explorers; finish with "
                "what you have."
            )
        try:
            self.sent += len(asked)
            with ThreadPoolExecutor(max_workers=len(asked), thread_name_prefix="explorer") as pool:
                done = list(pool.map(lambda qa: self.explore(*qa), asked))
        finally:
            self.budget.release(held_for_reviewer)
        parts = []
        for number, (explored, (question, _)) in enumerate(zip(done, asked, strict=True), 1):
            self._count(explored)
            body = explored.report or f"(no report: {explored.stopped})"
            parts.append(f"Explorer {number} — {question}\n{body}")
            progress.emit(
                "explorer",
                question=progress.arguments_summary({"question": question}),
                steps=explored.steps,
                cost=round(explored.cost, 6),
                read=len(explored.read),
            )
            transcript.add(
                "explorer",
                f"Question: {question}\nRead: {', '.join(explored.read) or '—'}\n\n{body}",
                name=f"explorer {self.sent - len(asked) + number}",
                is_error=not explored.report,
                usage=ExplorerUsage(
                    explorers=1,
                    input_tokens=explored.tokens.prompt,
                    output_tokens=explored.tokens.output,
                    cost_usd=round(explored.cost, 6),
                    steps=explored.steps,
                    model=self.config.model,
                ),
            )
        return (
            "The explorers' reports (what they say they read; check what you rely on):\n\n"
            + "\n\n".join(parts)
        )

    def _count(self, explored: Explored) -> None:
        usage = self.usage
        self.usage = usage.model_copy(
            update={
                "explorers": usage.explorers + 1,
                "input_tokens": usage.input_tokens + explored.tokens.prompt,
                "output_tokens": usage.output_tokens + explored.tokens.output,
                "cost_usd": usage.cost_usd + explored.cost,
                "steps": usage.steps + explored.steps,
            }
        )

    def explore(self, question: str, area: str) -> Explored:
        explored = Explored(question=question)
        prompt = explorer_prompt(self.job, question, area, report_chars=self.config.report_chars)
        tools = self.tools.explorer()
        specs = (*tools.specs, REPORT_SPEC)
        tools.elsewhere = (REPORT,)
        meter = Meter(
            self.config.price,
            self.max_output,
            pending_chars=len(prompt.system)
            + len(prompt.user)
            + len(json.dumps([s.input_schema for s in specs])),
        )
        try:
            chat = self.conversation(self.job, prompt, specs, self.env)
        except StageError as exc:
            explored.stopped = f"the explorer could not start: {exc}"
            return explored
        while explored.steps < self.config.steps:
            remaining = self.deadline - self.clock()
            if remaining <= 0:
                explored.stopped = "the review's deadline came first"
                return explored
            worst = meter.worst_next()
            if not self.budget.reserve(worst):
                explored.stopped = f"stopped at the cost cap ({self.budget.refusal(worst)})"
                return explored
            last = explored.steps == self.config.steps - 1
            try:
                turn = chat.send(timeout=min(remaining, 600), force=REPORT if last else None)
            except StageError as exc:  # the explorer's model failed: the reviewer goes on
                self.budget.release(worst)
                explored.stopped = f"its model failed: {exc}"
                return explored
            cost = call_cost(self.config.price, turn.tokens)
            self.budget.settle(worst, cost)
            explored.cost += cost
            explored.steps += 1
            explored.tokens.add(turn.tokens)
            meter.sent(turn.tokens)
            if not turn.calls:
                if turn.text.strip():  # a plain answer is taken as the report
                    explored.report = self._cut(turn.text)
                    return explored
                chat.say(NUDGE)
                meter.added(len(NUDGE))
                continue
            results: list[Result] = []
            for call in turn.calls:
                if call.name == REPORT and isinstance(call.arguments, dict):
                    report = call.arguments.get("report")
                    if isinstance(report, str) and report.strip():
                        explored.report = self._cut(report)
                        return explored
                results.append(self._run(tools, call, explored))
            note = LAST_STEP if explored.steps == self.config.steps - 1 else ""
            chat.answer(results, note=note)
            meter.added(sum(len(r.content) for r in results) + len(note))
        explored.stopped = f"it reached its step ceiling ({self.config.steps} model calls)"
        return explored

    def _run(self, tools: Tools, call: Any, explored: Explored) -> Result:
        if call.name == REPORT:
            return Result(call, "Give your report in `report` (a non-empty string).", True)
        explored.read.append(_brief(call))
        try:
            if call.error:
                raise ToolError(call.error)
            return Result(call, tools.call(call.name, call.arguments))
        except ToolError as exc:
            return Result(call, str(exc), True)
        except OSError as exc:
            return Result(call, f"Could not read it: {exc.strerror or exc}", True)

    def _cut(self, report: str) -> str:
        report = report.strip()
        limit = self.config.report_chars
        if len(report) <= limit:
            return report
        return report[:limit] + f"… (cut at {limit} characters)"


def _brief(call: Any) -> str:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    detail = next((str(v) for v in arguments.values() if isinstance(v, str)), "")
    return f"{call.name}({detail[:80]})"
