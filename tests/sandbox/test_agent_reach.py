"""The API engines' reach (issue 19): skills loaded on demand, explorers on the fast
model, the per-turn output cap and a cost cap that is never passed — through the real
SDKs against the fake model servers, in process."""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.agent import anthropic_api, openai_api
from sandbox.contract import (
    ChangedFile,
    Explorers,
    Limits,
    LineRange,
    Price,
    ReviewJob,
    SkillDocument,
)
from sandbox.prompt import review_prompt
from tests.fakes.models import Loop, Reply, ToolCall, ToolCalls, conversations

SUBMIT = {"findings": [], "summary": {"inspected_areas": ["refunds"], "confidence": 0.8}}
MAIN_PRICE = Price(input_per_mtok=3, output_per_mtok=15)
EXPLORER_PRICE = Price(input_per_mtok=1, output_per_mtok=5)
SKILLS = (
    SkillDocument(
        name="django-migrations",
        description="Changes to Django migrations",
        body="MIGRATIONS-BODY: a NOT NULL column without a default locks the table.",
    ),
    SkillDocument(name="payments", description="Money moving code", body="PAYMENTS-BODY"),
)


@dataclass
class Provider:
    engine: str
    fake: Any
    model: str
    fast: str  # the explorers' model

    def review(self, job: ReviewJob, root: Path):
        module = anthropic_api if self.engine == "anthropic" else openai_api
        return module.review(job, root)


def provider_for(engine: str, fake_anthropic, fake_openai) -> Provider:
    """The engine's fake, models and SDK module (also for tests/sandbox/test_model_attempts.py).
    The SDK is imported here, before the test's review starts, as a worker's fork server
    imports it before a run: its import (a second or more) is no part of a review's time,
    which some of these tests measure."""
    importlib.import_module(engine)
    if engine == "anthropic":
        return Provider("anthropic", fake_anthropic, "claude-sonnet-5-5", "claude-haiku-5-5")
    return Provider("openai", fake_openai, "gpt-5.5", "gpt-5-mini")


@pytest.fixture(params=["anthropic", "openai"])
def provider(request, fake_anthropic, fake_openai) -> Provider:
    return provider_for(request.param, fake_anthropic, fake_openai)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return checkout_made(tmp_path)


def checkout_made(tmp_path: Path) -> Path:
    """A small tree to review: two Python files and a long text file."""
    root = tmp_path / "checkout"
    (root / "app").mkdir(parents=True)
    (root / "app" / "pay.py").write_text(
        "def refund(amount):\n    # pays back\n    return gateway.pay(amount)\n"
    )
    (root / "app" / "gateway.py").write_text("def pay(amount):\n    return amount\n")
    (root / "big.txt").write_text("".join(f"line {n} {'x' * 150}\n" for n in range(400)))
    return root


def job(provider: Provider, **update) -> ReviewJob:
    limits = update.pop("limits", {})
    return ReviewJob(
        job_id="7",
        repository="acme/shop",
        pull_request=3,
        title="Refunds",
        base_sha="a" * 40,
        head_sha="b" * 40,
        diff="+++ b/app/pay.py\n@@ -0,0 +1,3 @@\n+def refund(amount):\n",
        changed_files=(
            ChangedFile(path="app/pay.py", status="added", added=(LineRange(start=1, end=3),)),
        ),
        model=provider.model,
        price=MAIN_PRICE,
        limits=Limits(**{"steps": 10, **limits}),
        **update,
    )


def explorers(provider: Provider, **config) -> Explorers:
    return Explorers(model=provider.fast, price=EXPLORER_PRICE, **config)


def reported(request) -> tuple[int, int]:
    """The (input, output) tokens the fake reported for one request."""
    usage = request.answer["usage"]
    if "input_tokens" in usage:
        return usage["input_tokens"], usage["output_tokens"]
    return usage["prompt_tokens"], usage["completion_tokens"]


def cost_of(requests, price: Price) -> float:
    return sum(price.cost(*reported(r)) for r in requests)


def results(request) -> list[str]:
    return [r.content for r in request.tool_results]


# --- skills ----------------------------------------------------------------------------


def test_it_loads_a_skill_only_when_the_model_asks_for_it(provider, checkout):
    provider.fake.script(
        ToolCall("load_skill", {"name": "django-migrations"}),
        ToolCall("load_skill", {"name": "security"}),
        ToolCall("submit_review", SUBMIT),
    )
    result = provider.review(job(provider, skill_documents=SKILLS), checkout)
    assert not result.incomplete
    first, second, third = provider.fake.model_requests
    # The prompt lists each skill by name and description; no body is sent unasked.
    assert "- django-migrations: Changes to Django migrations" in first.system
    assert "- payments: Money moving code" in first.system
    assert b"MIGRATIONS-BODY" not in first.raw and "load_skill" in first.tool_names
    [loaded] = results(second)
    assert loaded.startswith("Skill django-migrations: Changes to Django migrations")
    assert "MIGRATIONS-BODY: a NOT NULL column" in loaded
    [unknown] = results(third)
    assert "no skill named 'security'" in unknown
    assert "the skills are: django-migrations, payments" in unknown
    assert not any(b"PAYMENTS-BODY" in r.raw for r in provider.fake.model_requests)


def test_a_reviewer_without_named_skills_is_offered_no_load_skill(provider, checkout):
    provider.fake.script(ToolCall("submit_review", SUBMIT))
    provider.review(job(provider, skills="Always check refunds."), checkout)
    [request] = provider.fake.model_requests
    assert "load_skill" not in request.tool_names
    assert "Always check refunds." in request.system  # the guidance is always there, whole


def test_the_cli_engines_prompt_lists_the_skills_their_cli_loads_from_its_skills_folder():
    the_job = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40,
        skill_documents=SKILLS,
    )  # fmt: skip
    cli = review_prompt(the_job, finish="json", schema={})
    # The bodies are in the skills folder (sandbox/engines/cli/extras.py), not the prompt.
    assert "- django-migrations: Changes to Django migrations" in cli.system
    assert "load one as one of your skills" in cli.system
    assert "MIGRATIONS-BODY" not in cli.system and "PAYMENTS-BODY" not in cli.system
    assert "load_skill" not in cli.system
    api = review_prompt(the_job)
    assert "MIGRATIONS-BODY" not in api.system and "load_skill" in api.system


# --- finding one's way ------------------------------------------------------------------


def test_the_model_finds_its_way_with_the_symbol_index_and_import_resolution(provider, checkout):
    (checkout / "web").mkdir()
    (checkout / "web" / "api.ts").write_text(
        "import { pay } from './pay';\nexport function refund(n: number) { return pay(-n); }\n"
    )
    (checkout / "tsconfig.json").write_text('{"compilerOptions": {"paths": {"@/*": ["web/*"]}}}')
    (checkout / "db.sql").write_text("CREATE FUNCTION refund() RETURNS void AS $$ $$;\n")
    provider.fake.script(
        ToolCalls(
            [
                ToolCall("find_symbol", {"name": "refund"}),
                ToolCall("symbol_references", {"name": "pay"}),
                ToolCall("read_file", {"path": "@/api"}),
                ToolCall("read_file", {"path": "app.pay"}),
                ToolCall("read_file", {"path": "@/../../outside"}),
            ]
        ),
        ToolCall("submit_review", SUBMIT),
    )
    provider.review(job(provider), checkout)
    first, second = provider.fake.model_requests
    assert {"find_symbol", "symbol_references"} <= set(first.tool_names)
    found, uses, alias, module, escape = results(second)
    assert "app/pay.py:1 function refund: def refund(amount):" in found
    assert "web/api.ts:2 function refund: export function refund(n: number)" in found
    assert "SQL (no grammar here): 1" in found
    assert "app/pay.py:3: return gateway.pay(amount)" in uses
    assert "web/api.ts:1: import { pay } from './pay';" in uses
    assert alias.startswith("('@/api' resolved through the alias '@/*' to web/api.ts)")
    assert module.startswith("('app.pay' resolved as a Python module to app/pay.py)")
    assert "outside the repository" in escape


# --- explorers --------------------------------------------------------------------------

WHO = "Who calls refund?"
WHAT = "What does gateway.pay return?"


def by_conversation(provider: Provider):
    """Route the reviewer's requests and each explorer's (by its question) apart."""

    def route(request) -> str:
        if request.model != provider.fast:
            return "reviewer"
        text = json.dumps(request.messages)
        return WHO if WHO in text else WHAT

    return route


def test_explorers_work_on_the_fast_model_and_their_reports_reach_the_reviewer(provider, checkout):
    dispatch = {"explorers": [{"question": WHO, "area": "app/"}, {"question": WHAT}]}
    provider.fake.script(
        conversations(
            by_conversation(provider),
            {
                "reviewer": [
                    ToolCall("dispatch_explorers", dispatch, usage=(4000, 100)),
                    ToolCall("submit_review", SUBMIT, usage=(5000, 300)),
                ],
                WHO: [
                    ToolCall("search_code", {"pattern": r"refund\("}, usage=(2000, 50)),
                    ToolCall("submit_report", {"report": "Nothing calls it (app/pay.py:1)."}),
                ],
                WHAT: [
                    ToolCall("read_file", {"path": "app/gateway.py"}, usage=(1500, 40)),
                    Reply("pay returns its amount unchanged (app/gateway.py:2).", usage=(1700, 60)),
                ],
            },
        )
    )
    the_job = job(provider, explorers=explorers(provider, per_call=2, per_review=4))
    result = provider.review(the_job, checkout)
    assert not result.incomplete

    requests = provider.fake.model_requests
    fast = [r for r in requests if r.model == provider.fast]
    main = [r for r in requests if r.model == provider.model]
    assert len(fast) == 4 and len(main) == 2
    assert "dispatch_explorers" in main[0].tool_names
    for request in fast:  # no recursion, no submission: the read-only tools and a report
        assert "dispatch_explorers" not in request.tool_names
        assert "submit_review" not in request.tool_names
        assert {"read_file", "search_code", "submit_report"} <= set(request.tool_names)
    [reports] = results(main[1])
    assert reports.index(f"Explorer 1 — {WHO}") < reports.index(f"Explorer 2 — {WHAT}")
    assert "Nothing calls it (app/pay.py:1)." in reports
    assert "pay returns its amount unchanged (app/gateway.py:2)." in reports

    # Their tokens and cost are counted apart, and in the review's.
    explored = result.usage.explorers
    assert explored.explorers == 2 and explored.steps == 4 and explored.model == provider.fast
    assert explored.cost_usd == pytest.approx(cost_of(fast, EXPLORER_PRICE), abs=1e-6)
    assert explored.input_tokens == sum(reported(r)[0] for r in fast)
    assert result.usage.cost_usd == pytest.approx(
        cost_of(main, MAIN_PRICE) + cost_of(fast, EXPLORER_PRICE), abs=1e-6
    )
    assert result.usage.steps == 2 and result.usage.model == provider.model
    entries = [e for e in result.transcript if e.kind == "explorer"]
    assert [e.name for e in entries] == ["explorer 1", "explorer 2"]
    assert all(e.usage.cost_usd > 0 and e.usage.steps == 2 for e in entries)
    assert "search_code(refund\\()" in entries[0].content


def test_an_explorer_cannot_send_explorers_or_submit_the_review(provider, checkout):
    provider.fake.script(
        conversations(
            by_conversation(provider),
            {
                "reviewer": [
                    ToolCall("dispatch_explorers", {"explorers": [{"question": WHO}]}),
                    ToolCall("submit_review", SUBMIT),
                ],
                WHO: [
                    ToolCall("dispatch_explorers", {"explorers": [{"question": "deeper?"}]}),
                    ToolCall("submit_review", SUBMIT),
                    ToolCall("submit_report", {"report": "done"}),
                ],
            },
        )
    )
    result = provider.review(job(provider, explorers=explorers(provider)), checkout)
    fast = [r for r in provider.fake.model_requests if r.model == provider.fast]
    assert len(fast) == 3
    assert "There is no tool named 'dispatch_explorers'" in results(fast[1])[0]
    assert "There is no tool named 'submit_review'" in results(fast[2])[0]
    assert result.usage.explorers.explorers == 1 and not result.incomplete


def test_explorers_are_bounded_per_call_and_per_review(provider, checkout):
    three = {"explorers": [{"question": WHO}, {"question": WHAT}, {"question": WHO}]}
    two = {"explorers": [{"question": WHO}, {"question": WHAT}]}
    provider.fake.script(
        conversations(
            by_conversation(provider),
            {
                "reviewer": [
                    ToolCall("dispatch_explorers", three),
                    ToolCall("dispatch_explorers", two),
                    ToolCall("dispatch_explorers", two),
                    ToolCall("submit_review", SUBMIT),
                ],
                WHO: [Loop(Reply("a report"))],
                WHAT: [Loop(Reply("another report"))],
            },
        )
    )
    the_job = job(provider, explorers=explorers(provider, per_call=2, per_review=3))
    result = provider.review(the_job, checkout)
    main = [r for r in provider.fake.model_requests if r.model == provider.model]
    assert "At most 2 explorers at once; you asked for 3." in results(main[1])[0]
    assert "Explorer 2 — " in results(main[2])[0]
    assert "Only 1 of this review's 3 explorers are left; send 1 at most." in results(main[3])[0]
    assert result.usage.explorers.explorers == 2


def test_an_explorer_reaching_its_step_ceiling_is_reported_as_such(provider, checkout):
    provider.fake.script(
        conversations(
            by_conversation(provider),
            {
                "reviewer": [
                    ToolCall("dispatch_explorers", {"explorers": [{"question": WHO}]}),
                    ToolCall("submit_review", SUBMIT),
                ],
                WHO: [Loop(ToolCall("list_directory", {}))],
            },
        )
    )
    result = provider.review(job(provider, explorers=explorers(provider, steps=3)), checkout)
    fast = [r for r in provider.fake.model_requests if r.model == provider.fast]
    assert len(fast) == 3
    assert "submit_report" in json.dumps(fast[-1].body.get("tool_choice"))  # asked to report
    [entry] = [e for e in result.transcript if e.kind == "explorer"]
    assert entry.is_error and "step ceiling (3 model calls)" in entry.content


# --- the per-turn output cap ------------------------------------------------------------


def sent_output_cap(provider: Provider, request) -> int:
    if provider.engine == "anthropic":
        return request.body["max_tokens"]
    assert "max_tokens" not in request.body  # refused by reasoning models
    return request.body["max_completion_tokens"]


@pytest.mark.parametrize(("cap", "explorer_cap"), [(1234, 1234), (8000, 4096)])
def test_the_per_turn_output_cap_is_sent_with_every_call(provider, checkout, cap, explorer_cap):
    provider.fake.script(
        conversations(
            by_conversation(provider),
            {
                "reviewer": [
                    ToolCall("dispatch_explorers", {"explorers": [{"question": WHO}]}),
                    ToolCall("submit_review", SUBMIT),
                ],
                WHO: [Reply("a report")],
            },
        )
    )
    the_job = job(provider, explorers=explorers(provider), limits={"max_output_tokens": cap})
    provider.review(the_job, checkout)
    for request in provider.fake.model_requests:
        expected = explorer_cap if request.model == provider.fast else cap
        assert sent_output_cap(provider, request) == expected


# --- the cost cap is never passed -------------------------------------------------------


def spent_and_refused(result) -> tuple[float, float]:
    match = re.search(r"\$([\d.]+) spent.*could have cost up to \$([\d.]+)", result.incomplete)
    assert match, result.incomplete
    return float(match.group(1)), float(match.group(2))


@pytest.mark.parametrize(
    ("name", "step", "cap", "max_output"),
    [
        # Each page of a large file grows the prompt by ~20,000 tokens: the call that
        # would carry the next page past the cap is refused before it is made.
        ("a growing prompt", ToolCall("read_file", {"path": "big.txt"}), 1.00, 16_000),
        ("a fixed heavy prompt", ToolCall("list_directory", {}, usage=(60_000, 900)), 0.70, 4000),
        ("a big last answer", ToolCall("list_directory", {}, usage=(2000, 15_000)), 0.80, 16_000),
        ("a cheap loop", ToolCall("find_files", {"pattern": "*.py"}), 0.05, 1000),
    ],
)
def test_the_cost_cap_is_never_passed(provider, checkout, name, step, cap, max_output):
    provider.fake.script(Loop(step))
    the_job = job(
        provider,
        limits={"cost_cap_usd": cap, "max_output_tokens": max_output, "steps": 40},
    )
    result = provider.review(the_job, checkout)
    requests = provider.fake.model_requests
    assert result.incomplete.startswith("stopped at the cost cap before the review was submitted")
    assert result.usage.steps == len(requests) >= 1
    assert result.usage.cost_usd == pytest.approx(cost_of(requests, MAIN_PRICE), abs=1e-6)
    assert result.usage.cost_usd <= cap
    # The call that was not made could have passed it.
    spent, worst = spent_and_refused(result)
    assert spent == pytest.approx(result.usage.cost_usd, abs=1e-4) and spent + worst > cap


def test_explorers_count_in_the_cost_cap_and_leave_the_reviewer_room_to_submit(provider, checkout):
    provider.fake.script(
        conversations(
            by_conversation(provider),
            {
                "reviewer": [
                    ToolCall(
                        "dispatch_explorers", {"explorers": [{"question": WHO}]}, usage=(5000, 100)
                    ),
                    ToolCall("submit_review", SUBMIT, usage=(6000, 200)),
                ],
                WHO: [Loop(ToolCall("read_file", {"path": "app/pay.py"}, usage=(10_000, 500)))],
            },
        )  # fmt: skip
    )
    the_job = job(
        provider,
        explorers=explorers(provider, steps=20),
        limits={"cost_cap_usd": 0.12, "max_output_tokens": 1000},
    )
    result = provider.review(the_job, checkout)
    assert not result.incomplete  # the reviewer could still submit
    requests = provider.fake.model_requests
    fast = [r for r in requests if r.model == provider.fast]
    main = [r for r in requests if r.model == provider.model]
    assert 1 <= len(fast) < 20 and len(main) == 2
    [entry] = [e for e in result.transcript if e.kind == "explorer"]
    assert entry.is_error and "stopped at the cost cap" in entry.content
    assert result.usage.explorers.cost_usd == pytest.approx(cost_of(fast, EXPLORER_PRICE))
    total = cost_of(main, MAIN_PRICE) + cost_of(fast, EXPLORER_PRICE)
    assert result.usage.cost_usd == pytest.approx(total, abs=1e-6) and total <= 0.12
