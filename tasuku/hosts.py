"""The names a server bound to an address is reached by: for `make run BIND=...` (its
address passed as TASUKU_BIND) when TASUKU_BASE_URL is not set, the URL Tasuku puts in
its links and the hosts it answers (tasuku/settings.py).

An address of one interface is its own name. A wildcard (`0.0.0.0`, `::`) is reached
by no such name: the URL is the machine's name, the hosts are its names and addresses,
and whatever else people type (a DNS alias, a NAT's address) takes TASUKU_BASE_URL —
`manage.py serve` says so when it starts.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

WILDCARDS = {"0.0.0.0", "::", "[::]", ""}  # noqa: S104 - names to recognise, not to bind
LOOPBACK = ["127.0.0.1", "localhost", "[::1]"]
# An address of the documentation range: a UDP socket "connected" to it asks the kernel
# which local address would be used, and sends nothing.
PROBE = ("192.0.2.1", 9)


@dataclass(frozen=True)
class Served:
    base_url: str
    hosts: list[str]
    wildcard: bool  # bound to every interface: the URL is a guess at the machine's name


def bind_split(bind: str) -> tuple[str, str]:
    """(host, port) of a gunicorn bind address: `host:port`, `[v6]:port` or `port`."""
    if bind.isdigit():
        return "127.0.0.1", bind
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"TASUKU_BIND must be host:port, not {bind!r}")
    return host, port


def machine_names() -> list[str]:
    """This machine's names and non-loopback addresses, most telling first: its fully
    qualified name, its host name, and the addresses other machines reach it by."""
    names: list[str] = []

    def add(name: str) -> None:
        if name and name not in names and not name.startswith("127.") and name != "::1":
            names.append(name)

    hostname = socket.gethostname()
    add(socket.getfqdn(hostname) if "." in socket.getfqdn(hostname) else "")
    add(hostname)
    try:
        for *_, address in socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM):
            add(str(address[0]) if ":" not in str(address[0]) else f"[{address[0]}]")
    except OSError:
        pass  # a host name that does not resolve: its other names still serve
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(PROBE)
            add(probe.getsockname()[0])
    except OSError:
        pass  # no route anywhere: no outward address to name
    return names


def served(bind: str) -> Served:
    """The URL and hosts of a server bound to `bind`."""
    host, port = bind_split(bind)
    if host not in WILDCARDS:
        return Served(base_url=f"http://{host}:{port}", hosts=[*LOOPBACK, host], wildcard=False)
    names = machine_names()
    first = names[0] if names else "127.0.0.1"
    return Served(base_url=f"http://{first}:{port}", hosts=[*LOOPBACK, *names], wildcard=True)
