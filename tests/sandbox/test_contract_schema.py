"""The contract's JSON Schema, as `print_contract_schema` prints it, accepts what Tasuku
sends and what engines return, and refuses what they must not."""

from __future__ import annotations

import io
import json

import jsonschema
import pytest
from django.core.management import call_command

from sandbox.contract import (
    CONTRACT_VERSION,
    ChangedFile,
    ConnectorTool,
    Finding,
    LineRange,
    PassBrief,
    ReviewJob,
    ReviewResult,
)


def schemas(**options) -> dict:
    out = io.StringIO()
    call_command("print_contract_schema", stdout=out, **options)
    return json.loads(out.getvalue())


def test_it_prints_the_job_the_result_and_the_submission():
    printed = schemas()
    assert printed["version"] == CONTRACT_VERSION
    assert set(printed) == {"version", "ReviewJob", "ReviewResult", "Submission"}
    job = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40,
        changed_files=(ChangedFile(path="x.py", status="added", added=(LineRange(start=1, end=2),)),),
    )  # fmt: skip
    jsonschema.validate(json.loads(job.model_dump_json()), printed["ReviewJob"])
    result = ReviewResult(engine="static", findings=[{"path": "x.py"}])
    jsonschema.validate(json.loads(result.model_dump_json()), printed["ReviewResult"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"engine": "x", "incomplete": 3}, printed["ReviewResult"])


def test_one_schema_alone():
    submission = schemas(only="submission")
    assert "findings" in submission["properties"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"findings": [{"path": "x.py"}]}, submission)


def test_a_version_1_job_and_result_still_read_as_ones_without_the_new_reach():
    job = ReviewJob.model_validate(
        {"version": "1", "job_id": "1", "repository": "a/b", "pull_request": 1,
         "base_sha": "a" * 40, "head_sha": "b" * 40, "skills": "Be kind.",
         "limits": {"steps": 5, "cost_cap_usd": 1.0, "deadline_seconds": 60}}
    )  # fmt: skip
    assert job.skill_documents == () and job.explorers is None and job.web is None
    assert job.limits.max_output_tokens == 16_000 and job.skills == "Be kind."
    result = ReviewResult.model_validate(
        {"version": "1", "engine": "anthropic", "usage": {"input_tokens": 10, "cost_usd": 0.1},
         "transcript": [{"kind": "text", "content": "hi"}]}
    )  # fmt: skip
    assert result.usage.explorers is None and result.transcript[0].usage is None
    # And what version 2 adds is in the printed schema.
    printed = schemas()
    assert {"skill_documents", "explorers", "web"} <= set(printed["ReviewJob"]["properties"])
    jsonschema.validate(json.loads(result.model_dump_json()), printed["ReviewResult"])


def test_a_version_2_job_reads_as_one_with_no_secondary_repositories():
    job = ReviewJob.model_validate(
        {"version": "2", "job_id": "1", "repository": "a/b", "pull_request": 1,
         "base_sha": "a" * 40, "head_sha": "b" * 40}
    )  # fmt: skip
    assert job.secondaries == ()
    assert "secondaries" in schemas()["ReviewJob"]["properties"]


@pytest.mark.parametrize(
    "secondary",
    [
        {"full_name": "acme/..", "commit": "c" * 40, "path": "secondary/acme/.."},
        {"full_name": "acme/shared", "commit": "c" * 40, "path": "../secondary/acme/shared"},
        {"full_name": "acme/shared", "commit": "c" * 40, "path": "/secondary/acme/shared"},
        {"full_name": "acme/shared", "commit": "main", "path": "secondary/acme/shared"},
    ],
)
def test_a_secondary_repository_whose_path_climbs_or_whose_commit_is_no_id_is_refused(secondary):
    with pytest.raises(ValueError):
        ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                  head_sha="b" * 40, secondaries=(secondary,))  # fmt: skip


def test_a_version_2_job_and_result_still_read_as_ones_without_connectors():
    job = ReviewJob.model_validate(
        {"version": "2", "job_id": "1", "repository": "a/b", "pull_request": 1,
         "base_sha": "a" * 40, "head_sha": "b" * 40, "web": {"max_calls": 5},
         "limits": {"steps": 5, "max_output_tokens": 4000}}
    )  # fmt: skip
    assert job.connectors == () and job.limits.connector_calls == 30 and job.web.max_calls == 5
    result = ReviewResult.model_validate(
        {"version": "2", "engine": "openai", "usage": {"explorers": {"explorers": 1}},
         "transcript": [{"kind": "explorer", "content": "a report"}]}
    )  # fmt: skip
    assert result.usage.connectors is None and result.transcript[0].connector is None
    # A runner of version 2 reads a version-3 job, connectors and all, as one without them.
    v3 = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40,
        connectors=(ConnectorTool(name="jira_ticket", description="A ticket."),),
    )  # fmt: skip
    printed = schemas()
    assert "connectors" in printed["ReviewJob"]["properties"]
    jsonschema.validate(json.loads(v3.model_dump_json()), printed["ReviewJob"])
    assert "connectors" in printed["ReviewResult"]["$defs"]["Usage"]["properties"]


def test_a_version_3_job_reads_as_a_plain_review_and_its_findings_as_giving_no_reason():
    job = ReviewJob.model_validate(
        {"version": "3", "job_id": "1", "repository": "a/b", "pull_request": 1,
         "base_sha": "a" * 40, "head_sha": "b" * 40}
    )  # fmt: skip
    assert job.review_pass is None
    finding = Finding.model_validate(
        {"path": "x.py", "start_line": 1, "end_line": 1, "severity": "critical",
         "category": "security", "title": "Key in source", "blocking": True}
    )  # fmt: skip
    assert finding.critical_why == ""
    # What version 4 adds: the pass's brief in the job, the reason in what a model submits.
    printed = schemas()
    assert printed["version"] == CONTRACT_VERSION == "4"
    v4 = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40,
        review_pass=PassBrief(number=2, task_title="Refunds", task_description="Refund orders."),
    )  # fmt: skip
    jsonschema.validate(json.loads(v4.model_dump_json()), printed["ReviewJob"])
    assert "critical_why" in printed["Submission"]["$defs"]["Finding"]["properties"]
    with pytest.raises(ValueError):
        PassBrief(number=0)
