"""The one table of engines and their providers (sandbox/engines/__init__.py), and what
is read from it: a reviewer's provider, the one key and server an engine is given, a
model triage's conversation, the variables the Actions runner passes on."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from repos.models import Reviewer
from repos.policy import Engine
from reviews.engines import boundary as engines
from sandbox import actions_runner
from sandbox.agent.anthropic_api import AnthropicConversation
from sandbox.agent.openai_api import OpenAIConversation
from sandbox.engines import ENGINES, PROVIDERS, REGISTRY

# What each engine is, written out once more here to pin it down.
EXPECTED = {
    "static": ("", (), None),
    "anthropic": ("anthropic", ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"), AnthropicConversation),
    "claude-code": (
        "anthropic",
        ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        AnthropicConversation,
    ),
    "openai": ("openai", ("OPENAI_API_KEY", "OPENAI_BASE_URL"), OpenAIConversation),
    "codex": ("openai", ("OPENAI_API_KEY", "OPENAI_BASE_URL"), OpenAIConversation),
}


def test_every_engine_a_reviewer_may_name_is_in_the_registry_and_nothing_else():
    assert set(REGISTRY) == {e.value for e in Engine} == set(EXPECTED) == set(ENGINES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_engines_facts_are_what_every_user_reads(name):
    provider, variables, conversation = EXPECTED[name]
    facts = REGISTRY[name]
    assert (facts.name, facts.provider_name, facts.variables) == (name, provider, variables)
    assert facts.model_engine == (name != Engine.STATIC)
    assert Reviewer(slug="r", engine=name).provider == provider
    assert engines.conversation_for(name) is conversation
    assert engines.conversation_for(Engine(name)) is conversation
    module, function = ENGINES[name].split(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_an_engine_the_registry_does_not_know_has_no_conversation():
    assert engines.conversation_for("gpt-9") is None


def test_each_provider_names_its_key_and_server_and_its_conversation_loads():
    assert set(PROVIDERS) == {"anthropic", "openai"}
    for provider in PROVIDERS.values():
        assert provider.key_variable.endswith("_API_KEY")
        assert provider.url_variable.endswith("_BASE_URL")
        module, name = provider.conversation.split(":")
        assert isinstance(getattr(importlib.import_module(module), name), type)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_engine_is_given_its_providers_key_and_server_only(name, settings):
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "sk-ant", "https://a.example"
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "sk-oai", "https://o.example"
    env = engines.engine_environment(Reviewer(slug="r", engine=name))
    assert tuple(env) == EXPECTED[name][1]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_actions_runner_passes_on_the_engines_variables_only(name, monkeypatch, tmp_path):
    everything = {
        "ANTHROPIC_API_KEY": "sk-ant",
        "ANTHROPIC_BASE_URL": "https://a.example",
        "OPENAI_API_KEY": "sk-oai",
        "OPENAI_BASE_URL": "https://o.example",
        "GITHUB_TOKEN": "ghs_never",
    }
    for key, value in everything.items():
        monkeypatch.setenv(key, value)
    given = {}

    def local_run(engine, job, root, *, limits, allow_env, **relayed):
        given.update(engine=engine, allow=allow_env)
        return "result"

    monkeypatch.setattr("sandbox.runners.local.engine_run", local_run)

    class Job:
        class limits:
            deadline_seconds = 60

    assert actions_runner.engine_run(name, Job, tmp_path) == "result"
    assert given == {"engine": name, "allow": {k: everything[k] for k in EXPECTED[name][1]}}


def test_the_actions_runner_refuses_an_engine_the_registry_does_not_know(tmp_path):
    with pytest.raises(actions_runner.RunnerError, match="unknown engine"):
        actions_runner.engine_run("gpt-9", object(), tmp_path)


def test_the_registry_loads_without_django_or_a_providers_sdk():
    code = (
        "import sys; import sandbox.engines; "
        "assert not {'django', 'anthropic', 'openai'} & set(sys.modules), sorted(sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-I", "-c", code], check=True, cwd=root)
