"""The fake model servers, driven through the real `anthropic` and `openai` SDKs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.fakes.models import (
    ANTHROPIC_TEST_KEY,
    OPENAI_TEST_KEY,
    Fail,
    FakeAnthropic,
    FakeOpenAI,
    Hang,
    Loop,
    Malformed,
    ModelRequest,
    Reply,
    ToolCall,
    ToolCalls,
    rate_limited,
)

if TYPE_CHECKING:  # each test imports the SDK it drives: importing both at collection
    # cost every test process about 2 CPU s, most of whose tests never use them
    import anthropic
    import openai

CLAUDE = "claude-sonnet-5-5"
GPT = "gpt-5.5"
READ_FILE = {
    "name": "read_file",
    "description": "Read a file of the pull request.",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}
READ_FILE_FUNCTION = {
    "type": "function",
    "function": {
        "name": READ_FILE["name"],
        "description": READ_FILE["description"],
        "parameters": READ_FILE["input_schema"],
    },
}


def claude(
    fake: FakeAnthropic, *, key: str = ANTHROPIC_TEST_KEY, **kwargs: Any
) -> anthropic.Anthropic:
    import anthropic

    kwargs.setdefault("max_retries", 0)
    return anthropic.Anthropic(api_key=key, base_url=fake.base_url, **kwargs)


def gpt(fake: FakeOpenAI, *, key: str = OPENAI_TEST_KEY, **kwargs: Any) -> openai.OpenAI:
    import openai

    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(api_key=key, base_url=fake.base_url, **kwargs)


def ask_claude(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    kwargs.setdefault("model", CLAUDE)
    kwargs.setdefault("max_tokens", 1024)
    kwargs.setdefault("messages", [{"role": "user", "content": "Review this diff."}])
    return client.messages.create(**kwargs)


def ask_gpt(client: openai.OpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("model", GPT)
    kwargs.setdefault("messages", [{"role": "user", "content": "Review this diff."}])
    return client.chat.completions.create(**kwargs)


# --- Anthropic ---


def test_anthropic_round_trips_a_tool_call_and_its_result(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(
        ToolCall("read_file", {"path": "app.py"}, text="Let me look."),
        Reply("LGTM", usage=(1200, 30)),
    )
    client = claude(fake_anthropic)
    messages: list[Any] = [{"role": "user", "content": "Review this diff."}]

    first = ask_claude(client, system="You review code.", tools=[READ_FILE], messages=messages)
    assert first.stop_reason == "tool_use"
    assert first.content[0].type == "text" and first.content[0].text == "Let me look."
    call = first.content[1]
    assert call.type == "tool_use" and call.name == "read_file" and call.input == {"path": "app.py"}
    assert call.id.startswith("toolu_")

    messages += [
        first.to_param(),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": "print(1)"},
            ],
        },
    ]
    second = ask_claude(client, system="You review code.", tools=[READ_FILE], messages=messages)

    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text" and second.content[0].text == "LGTM"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (1200, 30)
    request = fake_anthropic.last_request
    assert request.system == "You review code."
    assert request.tool_names == ["read_file"]
    assert [(r.tool_use_id, r.content, r.is_error) for r in request.tool_results] == [
        (call.id, "print(1)", False)
    ]
    assert request.headers["anthropic-version"]
    assert request.credential == ANTHROPIC_TEST_KEY
    assert fake_anthropic.unused_steps == []


def test_anthropic_several_tool_calls_in_one_turn_need_every_result(
    fake_anthropic: FakeAnthropic,
) -> None:
    import anthropic

    fake_anthropic.script(
        ToolCalls(
            [ToolCall("read_file", {"path": "a.py"}), ToolCall("read_file", {"path": "b.py"})]
        ),
        Reply("done"),
    )
    client = claude(fake_anthropic)
    first = ask_claude(client, tools=[READ_FILE])
    a, b = first.content
    history: list[Any] = [{"role": "user", "content": "Review this diff."}, first.to_param()]

    with pytest.raises(anthropic.BadRequestError) as excinfo:
        ask_claude(
            client,
            tools=[READ_FILE],
            messages=[
                *history,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": a.id}]},
            ],
        )
    assert "`tool_use` ids were found without `tool_result` blocks" in str(
        excinfo.value.api_message
    )
    assert b.id in str(excinfo.value.api_message)

    results = [
        {"type": "tool_result", "tool_use_id": a.id, "content": "A"},
        {"type": "tool_result", "tool_use_id": b.id, "content": "no such file", "is_error": True},
    ]
    ask_claude(client, tools=[READ_FILE], messages=[*history, {"role": "user", "content": results}])
    assert [(r.content, r.is_error) for r in fake_anthropic.last_request.tool_results] == [
        ("A", False),
        ("no such file", True),
    ]


def test_anthropic_refuses_a_tool_result_answering_a_wrong_id(
    fake_anthropic: FakeAnthropic,
) -> None:
    import anthropic

    fake_anthropic.script(ToolCall("read_file", {"path": "app.py"}), Reply("unused"))
    client = claude(fake_anthropic)
    first = ask_claude(client, tools=[READ_FILE])

    with pytest.raises(anthropic.BadRequestError) as excinfo:
        ask_claude(
            client,
            tools=[READ_FILE],
            messages=[
                {"role": "user", "content": "Review this diff."},
                first.to_param(),
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_wrong", "content": "x"}
                    ],
                },
            ],
        )

    error = excinfo.value
    assert error.status_code == 400 and error.type == "invalid_request_error"
    assert error.api_message == (
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_wrong. Each `tool_result` block must have a corresponding `tool_use` block in "
        "the previous message."
    )
    assert fake_anthropic.unused_steps == [Reply("unused")]  # the model never saw it


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools": [READ_FILE, READ_FILE]}, "tools: Tool names must be unique."),
        (
            {"tools": [{"name": "read_file"}]},
            "tools.0.custom.input_schema: Field required",
        ),
        (
            {"messages": [{"role": "assistant", "content": "Hi"}]},
            'messages: first message must use the "user" role',
        ),
        ({"messages": []}, "messages: List should have at least 1 item after validation, not 0"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
            "messages: text content blocks must be non-empty",
        ),
    ],
)
def test_anthropic_refuses_what_the_real_api_refuses(
    fake_anthropic: FakeAnthropic, kwargs: dict[str, Any], message: str
) -> None:
    import anthropic

    fake_anthropic.script(Reply("unused"))
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        ask_claude(claude(fake_anthropic), **kwargs)
    assert excinfo.value.api_message == message


def test_anthropic_combines_consecutive_turns_of_one_role(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Reply("ok"))
    messages = [
        {"role": "user", "content": "Here is the diff."},
        {"role": "user", "content": "Review it."},
    ]
    assert ask_claude(claude(fake_anthropic), messages=messages).content[0].text == "ok"


def test_anthropic_refuses_streaming(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    with pytest.raises(anthropic.BadRequestError, match="streaming is not supported"):
        ask_claude(claude(fake_anthropic), stream=True)


def test_anthropic_refuses_a_wrong_key(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    fake_anthropic.script(Reply("unused"))

    with pytest.raises(anthropic.AuthenticationError) as excinfo:
        ask_claude(claude(fake_anthropic, key="sk-ant-wrong", max_retries=2))

    error = excinfo.value
    assert error.status_code == 401
    assert error.type == "authentication_error" and error.api_message == "invalid x-api-key"
    assert error.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": error.request_id,
    }
    assert error.request_id and error.request_id.startswith("req_")
    assert len(fake_anthropic.requests) == 1  # a 401 is not retried
    assert fake_anthropic.requests[0].credential == "sk-ant-wrong"


def test_anthropic_accepts_the_key_as_x_api_key_too(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    fake_anthropic.script(Reply("ok"))
    client = anthropic.Anthropic(
        auth_token="unused",
        base_url=fake_anthropic.base_url,
        default_headers={"Authorization": anthropic.Omit(), "X-Api-Key": ANTHROPIC_TEST_KEY},
    )
    assert ask_claude(client).content[0].text == "ok"
    assert "authorization" not in fake_anthropic.last_request.headers


def test_anthropic_answers_404_for_an_unknown_model(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    fake_anthropic.models = {CLAUDE}
    with pytest.raises(anthropic.NotFoundError) as excinfo:
        ask_claude(claude(fake_anthropic), model="claude-imaginary-9")
    assert excinfo.value.type == "not_found_error"
    assert excinfo.value.api_message == "model: claude-imaginary-9"


def test_anthropic_sdk_retries_a_rate_limit_after_retry_after(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(rate_limited(retry_after="1"), Reply("ok"))

    message = ask_claude(claude(fake_anthropic, max_retries=1))

    assert message.content[0].text == "ok"
    first, second = fake_anthropic.requests
    assert first.status == 429 and second.status == 200
    assert second.received_at - first.received_at >= 0.9  # it waited for retry-after
    assert second.headers["x-stainless-retry-count"] == "1"


def test_anthropic_sdk_retries_a_server_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Fail(500), Reply("ok"))
    assert ask_claude(claude(fake_anthropic, max_retries=1)).content[0].text == "ok"
    assert [r.status for r in fake_anthropic.requests] == [500, 200]


def test_anthropic_overloaded_surfaces_once_the_retries_are_spent(
    fake_anthropic: FakeAnthropic,
) -> None:
    import anthropic

    fake_anthropic.script(Loop(Fail(529, headers={"retry-after-ms": "10"})))

    with pytest.raises(anthropic.OverloadedError) as excinfo:
        ask_claude(claude(fake_anthropic, max_retries=2))

    assert isinstance(excinfo.value, anthropic.InternalServerError)
    assert excinfo.value.type == "overloaded_error"
    assert len(fake_anthropic.requests) == 3


def test_anthropic_malformed_json_raises_a_json_decode_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Malformed())
    with pytest.raises(json.JSONDecodeError):
        ask_claude(claude(fake_anthropic, max_retries=2))
    assert len(fake_anthropic.requests) == 1  # a 200 is never retried


def test_anthropic_hang_makes_the_client_time_out(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    fake_anthropic.script(Hang(5), Reply("after the retry"))
    client = claude(fake_anthropic, timeout=0.2)
    with pytest.raises(anthropic.APITimeoutError):
        ask_claude(client)

    retried = claude(fake_anthropic, timeout=0.2, max_retries=1)
    fake_anthropic.script(Hang(5), Reply("after the retry"))
    assert ask_claude(retried).content[0].text == "after the retry"


def test_anthropic_exhausted_script_fails_loudly_and_at_once(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    with pytest.raises(anthropic.InternalServerError, match="fake script exhausted"):
        ask_claude(claude(fake_anthropic, max_retries=2))
    assert len(fake_anthropic.requests) == 1  # x-should-retry: false


def test_anthropic_truncated_reply_stops_at_max_tokens(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Reply("The first half", truncated=True))
    assert ask_claude(claude(fake_anthropic)).stop_reason == "max_tokens"


def test_anthropic_default_usage_is_a_rough_count(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Reply("ok"))
    usage = ask_claude(
        claude(fake_anthropic), messages=[{"role": "user", "content": "x" * 4000}]
    ).usage
    assert 1000 <= usage.input_tokens <= 1100
    assert usage.output_tokens == 50


def test_anthropic_reads_env_set_by_the_fixture(fake_anthropic: FakeAnthropic) -> None:
    import anthropic

    fake_anthropic.script(Reply("from the environment"))
    assert ask_claude(anthropic.Anthropic()).content[0].text == "from the environment"


# --- scripting, shared by both dialects ---


def test_a_step_can_react_to_the_tool_result(fake_anthropic: FakeAnthropic) -> None:
    def verdict(request: ModelRequest) -> Reply:
        failed = any(result.is_error for result in request.tool_results)
        return Reply("the tool failed" if failed else "the tool worked")

    fake_anthropic.script(ToolCall("read_file", {"path": "x"}, id="toolu_pinned"), verdict)
    client = claude(fake_anthropic)
    first = ask_claude(client, tools=[READ_FILE])
    answer = ask_claude(
        client,
        tools=[READ_FILE],
        messages=[
            {"role": "user", "content": "Review this diff."},
            first.to_param(),
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_pinned", "is_error": True},
                ],
            },
        ],
    )
    assert answer.content[0].text == "the tool failed"


def test_a_failing_step_answers_500_and_is_kept_for_the_test(fake_openai: FakeOpenAI) -> None:
    import openai

    def broken(request: ModelRequest) -> Reply:
        raise RuntimeError("a bug in the test's step")

    fake_openai.script(broken)
    with pytest.raises(openai.InternalServerError, match="a bug in the test's step"):
        ask_gpt(gpt(fake_openai, max_retries=2))
    assert len(fake_openai.requests) == 1
    assert [str(error) for error in fake_openai.errors] == ["a bug in the test's step"]


def test_repeat_last_plays_a_model_that_never_stops_calling_tools(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply("thinking"), ToolCall("read_file", {"path": "x"}), repeat_last=True)
    client = gpt(fake_openai)
    ask_gpt(client)
    for _ in range(5):
        assert ask_gpt(client).choices[0].finish_reason == "tool_calls"
    assert len(fake_openai.model_requests) == 6


# --- OpenAI ---


def test_openai_round_trips_a_tool_call_and_its_result(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(ToolCall("read_file", {"path": "app.py"}), Reply("LGTM", usage=(900, 12)))
    client = gpt(fake_openai)
    messages: list[Any] = [
        {"role": "system", "content": "You review code."},
        {"role": "user", "content": "Review this diff."},
    ]

    first = ask_gpt(client, messages=messages, tools=[READ_FILE_FUNCTION])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "app.py"}

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "print(1)"},
    ]
    second = ask_gpt(client, messages=messages, tools=[READ_FILE_FUNCTION])

    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "LGTM"
    usage = second.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (900, 12, 912)
    request = fake_openai.last_request
    assert request.path == "/v1/chat/completions"
    assert request.system == "You review code."
    assert request.tool_names == ["read_file"]
    assert [(r.tool_use_id, r.content) for r in request.tool_results] == [(call.id, "print(1)")]


def test_openai_refuses_a_tool_message_answering_a_wrong_id(fake_openai: FakeOpenAI) -> None:
    import openai

    fake_openai.script(ToolCall("read_file", {"path": "app.py"}), Reply("unused"))
    client = gpt(fake_openai)
    first = ask_gpt(client, tools=[READ_FILE_FUNCTION]).choices[0].message

    with pytest.raises(openai.BadRequestError) as excinfo:
        ask_gpt(
            client,
            tools=[READ_FILE_FUNCTION],
            messages=[
                {"role": "user", "content": "Review this diff."},
                first.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": "call_wrong", "content": "x"},
            ],
        )

    error = excinfo.value
    assert error.status_code == 400 and error.type == "invalid_request_error"
    assert error.param == "messages.[2].tool_call_id"
    assert "'tool_call_id' of 'call_wrong' not found" in error.message


def test_openai_refuses_a_tool_message_without_tool_calls(fake_openai: FakeOpenAI) -> None:
    import openai

    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding message"):
        ask_gpt(
            gpt(fake_openai),
            messages=[
                {"role": "user", "content": "Review this diff."},
                {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            ],
        )


def test_openai_refuses_arguments_sent_back_as_an_object(fake_openai: FakeOpenAI) -> None:
    import openai

    assistant = {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": {}}}
        ],
    }
    with pytest.raises(openai.BadRequestError) as excinfo:
        ask_gpt(
            gpt(fake_openai),
            messages=[
                {"role": "user", "content": "Review this diff."},
                assistant,
                {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            ],
        )
    assert excinfo.value.code == "invalid_type"


def test_openai_refuses_a_tool_that_is_not_a_function(fake_openai: FakeOpenAI) -> None:
    import openai

    with pytest.raises(openai.BadRequestError) as excinfo:
        ask_gpt(gpt(fake_openai), tools=[{"type": "retrieval", "function": {"name": "x"}}])
    assert excinfo.value.param == "tools[0].type"


def test_openai_refuses_a_wrong_key(fake_openai: FakeOpenAI) -> None:
    import openai

    with pytest.raises(openai.AuthenticationError) as excinfo:
        ask_gpt(gpt(fake_openai, key="sk-wrong-0123456789", max_retries=2))

    error = excinfo.value
    assert error.status_code == 401 and error.code == "invalid_api_key"
    assert error.message.startswith("Error code: 401 - Incorrect API key provided: sk-")
    assert error.request_id and error.request_id.startswith("req_")
    assert len(fake_openai.requests) == 1


def test_openai_answers_404_for_an_unknown_model(fake_openai: FakeOpenAI) -> None:
    import openai

    fake_openai.models = {GPT}
    with pytest.raises(openai.NotFoundError) as excinfo:
        ask_gpt(gpt(fake_openai), model="gpt-imaginary")
    assert excinfo.value.code == "model_not_found"
    assert "The model `gpt-imaginary` does not exist" in excinfo.value.message


def test_openai_refuses_max_tokens_for_a_reasoning_model(fake_openai: FakeOpenAI) -> None:
    import openai

    fake_openai.script(Reply("ok"))
    with pytest.raises(openai.BadRequestError) as excinfo:
        ask_gpt(gpt(fake_openai), max_tokens=100)
    assert excinfo.value.code == "unsupported_parameter"
    assert ask_gpt(gpt(fake_openai), max_completion_tokens=100).choices[0].message.content == "ok"


def test_openai_sdk_retries_a_rate_limit_after_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(rate_limited(retry_after="1"), Reply("ok"))

    completion = ask_gpt(gpt(fake_openai, max_retries=1))

    assert completion.choices[0].message.content == "ok"
    first, second = fake_openai.requests
    assert first.status == 429 and second.status == 200
    assert second.received_at - first.received_at >= 0.9


def test_openai_sdk_does_not_retry_when_retry_after_exceeds_two_minutes(
    fake_openai: FakeOpenAI,
) -> None:
    import openai

    fake_openai.script(rate_limited(retry_after="121"), Reply("unused"))
    with pytest.raises(openai.RateLimitError) as excinfo:
        ask_gpt(gpt(fake_openai, max_retries=2))
    assert excinfo.value.code == "rate_limit_exceeded"
    assert len(fake_openai.requests) == 1


def test_openai_sdk_retries_a_server_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fail(503), Reply("ok"))
    assert ask_gpt(gpt(fake_openai, max_retries=1)).choices[0].message.content == "ok"
    assert [r.status for r in fake_openai.requests] == [503, 200]


def test_openai_malformed_json_raises_a_json_decode_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Malformed())
    with pytest.raises(json.JSONDecodeError):
        ask_gpt(gpt(fake_openai, max_retries=2))
    assert len(fake_openai.requests) == 1


def test_openai_truncated_reply_finishes_for_length(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply("The first half", truncated=True))
    assert ask_gpt(gpt(fake_openai)).choices[0].finish_reason == "length"


def test_openai_broken_tool_arguments_come_through_verbatim(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(ToolCall("read_file", '{"path": '))
    (call,) = ask_gpt(gpt(fake_openai)).choices[0].message.tool_calls
    assert call.function.arguments == '{"path": '


def test_openai_reads_env_set_by_the_fixture(fake_openai: FakeOpenAI) -> None:
    import openai

    fake_openai.script(Reply("from the environment"))
    assert ask_gpt(openai.OpenAI()).choices[0].message.content == "from the environment"


def test_openai_compatible_server_under_another_prefix() -> None:
    import openai

    fake = FakeOpenAI(prefix="/compat/v1", keys=None, models={"llama-3.1-8b"}).start()
    try:
        fake.script(Reply("hello from llama"))
        client = openai.OpenAI(api_key="anything", base_url=fake.base_url, max_retries=0)
        assert fake.base_url.endswith("/compat/v1")
        completion = ask_gpt(client, model="llama-3.1-8b")
        assert completion.choices[0].message.content == "hello from llama"
        with pytest.raises(openai.NotFoundError):
            ask_gpt(client, model=GPT)
    finally:
        fake.stop()
