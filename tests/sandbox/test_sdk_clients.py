"""The model SDKs' HTTP clients: an engine's conversations (triage, the review, each
explorer, the memory) share one TLS context a process instead of loading the CA bundle
for each, and each conversation closes the client it was given. Through the real SDKs,
against the fake model servers, in process."""

from __future__ import annotations

import gc
import ssl

import pytest

from sandbox.agent import anthropic_api, conversation, openai_api
from sandbox.prompt import Prompt
from tests.fakes.models import Reply
from tests.sandbox.test_agent_reach import job, provider_for

PROMPT = Prompt(system="You review code.", user="Say hello.", boundary="b")


def conversation_of(engine: str):
    """The engine's conversation, made as an engine makes one (the fake's fixture points
    the SDK at it through the environment)."""
    if engine == "anthropic":
        return anthropic_api.AnthropicConversation
    return openai_api.OpenAIConversation


@pytest.fixture
def loads(monkeypatch) -> list[tuple]:
    """Every CA bundle a TLS context loads from now on, with no context kept yet."""
    seen: list[tuple] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(self, *args, **kwargs):
        seen.append(args or tuple(kwargs.values()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    conversation._tls_context.cache_clear()
    yield seen
    conversation._tls_context.cache_clear()


@pytest.mark.parametrize("engine", ["anthropic", "openai"])
def test_an_engines_conversations_load_the_ca_bundle_once(
    engine, loads, fake_anthropic, fake_openai
):
    provider = provider_for(engine, fake_anthropic, fake_openai)
    make = conversation_of(engine)
    provider.fake.script(Reply("hello"), Reply("hello"), Reply("hello"))
    chats = [make(job(provider), PROMPT, ()) for _ in range(3)]
    assert len(loads) == 1  # one context for the three
    for chat in chats:  # and each still talks to its server, over the SDK's own client
        assert chat.send(timeout=30).text == "hello"
    context = conversation._tls_context(None, None)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # the system's bundle, as the SDK's


@pytest.mark.parametrize("engine", ["anthropic", "openai"])
def test_a_ca_bundle_named_in_the_environment_gets_a_context_of_its_own(
    engine, loads, fake_anthropic, fake_openai, monkeypatch, tmp_path
):
    """SSL_CERT_FILE names the CA bundle the SDK would trust (a proxy's, a company's CA):
    the kept context is the one made from it, not the system's."""
    provider = provider_for(engine, fake_anthropic, fake_openai)
    make = conversation_of(engine)
    make(job(provider), PROMPT, ())
    bundle = tmp_path / "company-ca.pem"
    bundle.write_text(_a_ca_pem())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    make(job(provider), PROMPT, ())
    make(job(provider), PROMPT, ())
    assert len(loads) == 2 and str(bundle) in loads[1]
    assert conversation._tls_context(str(bundle), None).cert_store_stats()["x509_ca"] == 1


@pytest.mark.parametrize("engine", ["anthropic", "openai"])
def test_a_conversation_closes_the_client_it_was_given(engine, fake_anthropic, fake_openai):
    provider = provider_for(engine, fake_anthropic, fake_openai)
    make = conversation_of(engine)
    provider.fake.script(Reply("hello"))
    chat = make(job(provider), PROMPT, ())
    chat.send(timeout=30)
    client = chat.client
    assert not client.is_closed()
    del chat
    gc.collect()
    assert client.is_closed()


def _a_ca_pem() -> str:
    """One self-signed CA certificate, made here."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Company CA")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


@pytest.mark.parametrize("engine", ["anthropic", "openai"])
def test_a_ca_bundle_that_cannot_be_read_is_a_coded_error_naming_it(
    engine, loads, monkeypatch, tmp_path, fake_anthropic, fake_openai
):
    """An image whose SSL_CERT_FILE names a missing file: the SDK alone said only "No
    such file or directory". The conversation is refused with the code that says whose
    fix it is and the file it could not read; nothing is kept, so a fixed bundle is
    read on the next try."""
    from sandbox.errors import ProviderError
    from tasuku.errors import CODES

    provider = provider_for(engine, fake_anthropic, fake_openai)
    missing = tmp_path / "no-such-bundle.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    with pytest.raises(ProviderError) as refused:
        conversation_of(engine)(job(provider), PROMPT, ())
    assert refused.value.code == "provider-ca-bundle" and refused.value.permanent
    assert f"SSL_CERT_FILE={missing}" in str(refused.value)
    assert "provider-ca-bundle" in CODES
    monkeypatch.delenv("SSL_CERT_FILE")
    provider.fake.script(Reply("hello"))
    assert conversation_of(engine)(job(provider), PROMPT, ()).send(timeout=30).text == "hello"
