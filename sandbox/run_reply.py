"""Run one reply job on the checkout in the current directory: a `ReplyJob` as JSON on
stdin, its `ReplyResult` as JSON on stdout (`python -I -m sandbox.run_reply <engine>`),
with the conversation of the engine's provider. It imports no Django."""

from __future__ import annotations

import sys
from functools import partial

from sandbox.agent.reply import agent_reply
from sandbox.contract import ReplyJob
from sandbox.engines import REGISTRY
from sandbox.entry import Handler, Program, resolved


def reply_start(engine: str) -> Handler:
    provider = REGISTRY[engine].provider
    assert provider is not None  # the program's choices are the engines with one
    return partial(agent_reply, engine=engine, conversation=resolved(provider.conversation))


PROGRAM = Program(
    "run_reply",
    sorted(name for name, facts in REGISTRY.items() if facts.provider),
    ReplyJob,
    reply_start,
    # A reply reports no stage of its own: every failure reads as the reply's (exit 3).
    understood=(),
)
main = PROGRAM.main


if __name__ == "__main__":
    PROGRAM.exit(sys.argv)
