"""`make install`'s SECRET_KEY for a machine of one's own: written once into the project's
`.env`, so that `make run`, the worker and `manage.py review` share it (Tasuku refuses to
start without one outside DEBUG: tasuku/settings.py).

Nothing is written when the environment or `.env` already has a key. A `.secret_key` file
from earlier versions (which generated the key there) is moved into `.env`, so that what
it sealed stays readable. Standard library only: it runs before Django can start.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSIGNED = re.compile(r"^\s*(?:export\s+)?SECRET_KEY\s*=\s*\S", re.M)


def key_ensure(env_file: Path, legacy: Path) -> str | None:
    """Write a SECRET_KEY into `env_file` unless one is set; what was done, or None."""
    if os.environ.get("SECRET_KEY"):
        return None
    text = env_file.read_text() if env_file.exists() else ""
    if ASSIGNED.search(text):
        return None
    old = legacy.read_text().strip() if legacy.exists() else ""
    key = old or secrets.token_urlsafe(50)
    created = not env_file.exists()
    with env_file.open("a") as out:
        if text and not text.endswith("\n"):
            out.write("\n")
        out.write(f"SECRET_KEY={key}\n")
    if created:
        env_file.chmod(0o600)
    if old:
        legacy.unlink()
        return f"SECRET_KEY: moved from {legacy.name} into {env_file.name}"
    return (
        f"SECRET_KEY: a new one written to {env_file.name} (it seals stored credentials: "
        "keep it with the database)"
    )


def main() -> None:
    said = key_ensure(ROOT / ".env", ROOT / ".secret_key")
    if said:
        print(said, file=sys.stderr)


if __name__ == "__main__":
    main()
