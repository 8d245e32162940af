"""A stateful fake of the Docker Engine API, served over real HTTP on 127.0.0.1.

The docker runner talks to it through the real docker SDK (`DOCKER_HOST=tcp://…` or
`docker.DockerClient(base_url=fake.url)`), so what is tested is the runner's actual API
traffic. It implements what the runner's flow calls, as the daemon answers it:

- `GET /_ping`, `GET /version` (the SDK negotiates the API version from it); a path's
  `/v1.xx` prefix is checked against the supported range (400 outside it).
- `GET /images/{name}/json`: 404 `No such image: …` when absent.
- `POST /containers/create?name=…`: 400 for an invalid name or a bind source that does
  not exist, 404 for a missing image or network, 409 `Conflict. The container name …`
  when the name is taken. Every create body is kept (`created[i].config`).
- `POST /containers/{id}/start` (304 when already started), `POST /containers/{id}/wait`
  (blocks until the container exits, then `{"StatusCode": N, "Error": null}`),
  `GET /containers/{id}/logs` (Docker's multiplexed stream: 8-byte headers of stream
  type, three zero bytes, big-endian size; `stdout`, `stderr`, `tail`, `follow`),
  `GET /containers/{id}/json` (State with Status, ExitCode, OOMKilled …),
  `POST /containers/{id}/kill` (409 when not running), `DELETE /containers/{id}`
  (409 for a running container unless `force`).
- Errors are `{"message": …}` with Docker's status codes and wording.

A container runs the fake's `program`: a `Program` (exit code, stdout, stderr, run time,
OOM kill, hang) or a callable given the container's `Invocation` (its create body and the
host files behind its mounts) that returns one. A container whose command is
`timeout -s KILL N …` is killed after N seconds, as its PID 1 would, unless the program
is `stuck`. Every call is recorded (`calls`, `calls_to`); `inject` makes the next calls
fail with a status or drop the connection.
"""

from __future__ import annotations

from tests.fakes.docker.server import API_VERSION, FakeDocker
from tests.fakes.docker.state import Call, FakeContainer, Image, Injection, Invocation, Program

__all__ = [
    "API_VERSION",
    "Call",
    "FakeContainer",
    "FakeDocker",
    "Image",
    "Injection",
    "Invocation",
    "Program",
]
