"""Run one reply job on the checkout in the current directory: a `ReplyJob` as JSON on
stdin, its `ReplyResult` as JSON on stdout (`python -I -m sandbox.run_reply <engine>`),
with the conversation of the engine's provider. It imports no Django."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from sandbox.agent.reply import agent_reply
from sandbox.contract import ReplyJob
from sandbox.engines import REGISTRY
from sandbox.entry import exit_with


def main(argv: list[str]) -> int:
    models = sorted(name for name, facts in REGISTRY.items() if facts.provider)
    if len(argv) != 2 or argv[1] not in models:
        print(f"usage: run_reply {{{','.join(models)}}}", file=sys.stderr)
        return 2
    provider = REGISTRY[argv[1]].provider
    module, name = provider.conversation.split(":")
    conversation = getattr(importlib.import_module(module), name)
    job = ReplyJob.model_validate_json(sys.stdin.read())
    result = agent_reply(job, Path.cwd(), engine=argv[1], conversation=conversation)
    sys.stdout.write(result.model_dump_json())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    # A reply reports no stage of its own: every failure reads as the reply's (exit 3).
    exit_with(main, sys.argv, understood=())
