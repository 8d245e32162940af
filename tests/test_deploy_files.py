"""The deployment files say what exists: compose.yaml's services, commands and files,
the Dockerfile's steps, the systemd units' commands, the settings they name; and nginx
accepts deploy/nginx/tasuku.conf (when nginx is installed). No container engine runs
here, so the image itself is not built by the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
UNITS = {p.name: p.read_text() for p in (ROOT / "deploy" / "systemd").glob("*.service")}
SETTING = re.compile(r"\b((?:TASUKU|GITHUB)_[A-Z0-9_]+)\b")
# The variables tasuku/settings.py reads from the environment.
READ_FROM_ENVIRONMENT = set(
    re.findall(
        r'env(?:\.\w+)?\(\s*["\x27]([A-Z0-9_]+)["\x27]',
        (ROOT / "tasuku" / "settings.py").read_text(),
    )
)


def manage_commands(text: str) -> set[str]:
    return set(re.findall(r"manage\.py\"?,? \"?([a-z_]+)", text))


def test_compose_runs_the_database_the_migration_web_worker_and_the_proxy():
    services = COMPOSE["services"]
    assert set(services) == {"db", "migrate", "web", "worker", "proxy", "redis"}
    assert services["redis"]["profiles"] == ["redis"]  # only when asked for
    for name in ("migrate", "web", "worker"):
        service = services[name]
        assert service["build"] == "." and service["env_file"] == ".env"
        assert service["environment"]["DATABASE_URL"] == "postgres://tasuku@db:5432/tasuku"
        assert service["environment"]["PGPASSWORD"].startswith("${POSTGRES_PASSWORD:?")
        assert service["environment"]["SECRET_KEY"].startswith("${SECRET_KEY:?")
        assert "tasuku-work:/var/lib/tasuku" in service["volumes"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["worker"]["command"] == ["python", "manage.py", "worker"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["proxy"]["network_mode"] == "service:web"
    readme = (ROOT / "README.md").read_text()
    for volume in services["proxy"]["volumes"]:
        source = volume.split(":")[0]
        if source in ("./deploy/certs", "./deploy/acme"):
            # Made by the README's steps, filled by certbot: not in the checkout.
            assert "mkdir -p deploy/certs deploy/acme" in readme
        elif source.startswith("./"):
            assert (ROOT / source).exists(), source


def test_nginx_answers_acme_on_port_80_and_the_readme_edits_no_tracked_file():
    conf = (ROOT / "deploy" / "nginx" / "tasuku.conf").read_text()
    plain = conf[conf.index("listen 80;") :]
    acme = re.search(r"location /\.well-known/acme-challenge/ \{\s*root (\S+);", plain)
    assert acme and "return 301" in plain
    assert f"./deploy/acme:{acme.group(1)}:ro" in COMPOSE["services"]["proxy"]["volumes"]
    readme = (ROOT / "README.md").read_text()
    assert "sed -i" not in readme and "TASUKU_WEBHOOK_MAX_BYTES" not in conf


def test_every_command_and_setting_the_deployment_files_name_exists():
    known = set(get_commands())
    texts = [(ROOT / "compose.yaml").read_text(), DOCKERFILE, *UNITS.values()]
    for text in texts:
        for command in manage_commands(text):
            assert command in known, command
        for name in SETTING.findall(text):
            assert name in READ_FROM_ENVIRONMENT, name


def test_the_image_runs_as_a_user_with_a_health_check_and_collected_static_files():
    assert re.search(r"^USER tasuku$", DOCKERFILE, re.M)
    assert DOCKERFILE.index("USER tasuku") < DOCKERFILE.index("CMD [")
    assert "HEALTHCHECK" in DOCKERFILE and "/healthz" in DOCKERFILE
    assert "manage.py collectstatic" in DOCKERFILE
    # The dependency layer is built from pyproject.toml alone (cached until it changes).
    assert DOCKERFILE.index("COPY pyproject.toml") < DOCKERFILE.index("COPY --chown")
    for copied in re.findall(r"^COPY (?:--\S+ )?(\S+) ", DOCKERFILE, re.M):
        assert (ROOT / copied).exists(), copied


def test_the_systemd_units_run_web_and_worker_from_the_checkout():
    web, worker = UNITS["tasuku-web.service"], UNITS["tasuku-worker.service"]
    assert (
        "gunicorn tasuku.wsgi --config python:tasuku.gunicorn_config --bind 127.0.0.1:8000" in web
    )
    assert "manage.py migrate" in web and "manage.py worker" in worker


def _seconds(value: str) -> int:
    return int(value.rstrip("s"))


def test_every_process_manager_waits_longer_than_tasuku_takes_to_stop(settings):
    """The stop bounds (docs/operations.md, *Stopping*) under each manager's timeout: the
    worker's TASUKU_STOP_SECONDS, the web's --graceful-timeout."""
    web, worker = UNITS["tasuku-web.service"], UNITS["tasuku-worker.service"]
    stop, graceful = settings.TASUKU_STOP_SECONDS, 10
    assert "--graceful-timeout 10" in web
    for unit, bound in ((worker, stop), (web, graceful)):
        # Every process is signalled: each stops by itself, none is killed unasked.
        assert re.search(r"^KillMode=(control-group|mixed)$", unit, re.M)
        timeout = int(re.search(r"^TimeoutStopSec=(\d+)$", unit, re.M).group(1))
        assert timeout >= bound + 5
    services = COMPOSE["services"]
    assert _seconds(services["worker"]["stop_grace_period"]) >= stop + 5
    assert _seconds(services["web"]["stop_grace_period"]) >= graceful + 5
    # PID 1 of the image reaps orphans and passes the stop to the whole group.
    assert 'ENTRYPOINT ["/usr/bin/tini", "-g", "--"]' in DOCKERFILE
    assert '"--config", "python:tasuku.gunicorn_config"' in DOCKERFILE
    # Kubernetes' default grace (30 s) is above the worker's bound, with room.
    assert stop + 5 <= 30


@pytest.mark.skipif(not shutil.which("nginx") and not Path("/usr/sbin/nginx").exists(),
                    reason="nginx is not installed (Debian: nginx-light)")  # fmt: skip
def test_nginx_accepts_the_shipped_configuration(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tasuku.example.com")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    (tmp_path / "fullchain.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "privkey.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))  # fmt: skip
    shipped = (ROOT / "deploy" / "nginx" / "tasuku.conf").read_text()
    (tmp_path / "tasuku.conf").write_text(shipped.replace("/etc/ssl/tasuku", str(tmp_path)))
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\n"
        "events {}\n"
        f"http {{ client_body_temp_path {tmp_path}/body; proxy_temp_path {tmp_path}/proxy;\n"
        f"  include {tmp_path}/tasuku.conf; }}\n"
    )
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    checked = subprocess.run([binary, "-t", "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path)],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    assert checked.returncode == 0, checked.stderr

    # Served on free ports: port 80's server answers an ACME challenge from the webroot
    # certbot writes to, and redirects everything else to https.
    import socket

    import requests

    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    webroot = tmp_path / "acme"
    (webroot / ".well-known" / "acme-challenge").mkdir(parents=True)
    (webroot / ".well-known" / "acme-challenge" / "tok3n").write_text("tok3n.thumbprint")
    served = (
        shipped.replace("/etc/ssl/tasuku", str(tmp_path))
        .replace("listen 443 ssl", f"listen 127.0.0.1:{ports[0]} ssl")
        .replace("listen 80;", f"listen 127.0.0.1:{ports[1]};")
        .replace("/var/www/certbot", str(webroot))
    )
    (tmp_path / "tasuku.conf").write_text(served)
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers read the test's files
    (tmp_path / "nginx.conf").write_text(user + (tmp_path / "nginx.conf").read_text())
    nginx = subprocess.Popen([binary, "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path),  # noqa: S603
                              "-g", "daemon off;"], stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        plain = f"http://127.0.0.1:{ports[1]}"
        for _ in range(100):
            try:
                challenge = requests.get(f"{plain}/.well-known/acme-challenge/tok3n", timeout=5)
                break
            except requests.ConnectionError:
                assert nginx.poll() is None, nginx.stderr.read()
                time.sleep(0.05)
        assert (challenge.status_code, challenge.text) == (200, "tok3n.thumbprint")
        other = requests.get(f"{plain}/webhooks/github", timeout=5, allow_redirects=False,
                             headers={"Host": "tasuku.example.com"})  # fmt: skip
        assert other.status_code == 301
        assert other.headers["Location"] == "https://tasuku.example.com/webhooks/github"
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)


def interpolated(value: str, variables: dict[str, str]) -> str:
    """`value` with Compose's `${NAME:?message}` and `${NAME}` filled from `variables`."""
    return re.sub(r"\$\{(\w+)(?::\?[^}]*)?\}", lambda m: variables[m.group(1)], value)


def test_composes_database_settings_work_for_a_password_urls_cannot_hold(monkeypatch):
    """The password reaches PostgreSQL as PGPASSWORD, never inside DATABASE_URL, where
    `/`, `@`, `:` or `#` broke the URL ("Port could not be cast to integer")."""
    import environ

    password = "p/ss@w:rd#1?"
    web = COMPOSE["services"]["web"]["environment"]
    variables = {"POSTGRES_PASSWORD": password, "SECRET_KEY": "k"}
    url = interpolated(web["DATABASE_URL"], variables)
    assert interpolated(web["PGPASSWORD"], variables) == password
    assert COMPOSE["services"]["db"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?"
    )
    parsed = environ.Env.db_url_config(url)
    assert (parsed["HOST"], parsed["PORT"], parsed["USER"], parsed["NAME"]) == (
        "db",
        5432,
        "tasuku",
        "tasuku",
    )
    assert not parsed["PASSWORD"]
    # libpq takes the password from the environment when the settings give none (here
    # against the PostgreSQL of this machine, when there is one, in place of `db`).
    psycopg = pytest.importorskip("psycopg")
    monkeypatch.setenv("PGPASSWORD", password)
    try:
        connection = psycopg.connect(host="127.0.0.1", port=5432, user="postgres",
                                     dbname="postgres", connect_timeout=3)  # fmt: skip
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL on 127.0.0.1:5432 ({exc})")
    with connection:
        assert connection.info.password == password


# --- The systemd units, as the README's host steps install them -------------------------

# Where systemd makes each kind of a unit's own folders (systemd.exec(5)).
UNIT_FOLDERS = {
    "StateDirectory": "/var/lib",
    "RuntimeDirectory": "/run",
    "ConfigurationDirectory": "/etc",
    "CacheDirectory": "/var/cache",
    "LogsDirectory": "/var/log",
}
# What the README's host steps make before the units start: the checkout with its .venv,
# and the settings file.
CHECKOUT = "/opt/tasuku"
SETTINGS_FILE = "/etc/tasuku/tasuku.env"


def unit_lines(text: str) -> list[tuple[str, str]]:
    """(key, value) of every setting of a unit file, in order."""
    return [
        (key.strip(), value.strip())
        for key, _, value in (
            line.partition("=")
            for line in text.splitlines()
            if "=" in line and not line.lstrip().startswith(("#", ";", "["))
        )
    ]


def unit_made(text: str) -> set[str]:
    """The folders systemd makes for the unit before it starts."""
    made = set()
    for key, value in unit_lines(text):
        if key in UNIT_FOLDERS:
            made.update(f"{UNIT_FOLDERS[key]}/{name}" for name in value.split())
    return made


def unit_environment(text: str) -> dict[str, str]:
    return dict(v.split("=", 1) for k, v in unit_lines(text) if k == "Environment")


def unit_paths(text: str) -> set[str]:
    """Every path the unit names: its folders, files, programs and path settings."""
    named = set()
    for key, value in unit_lines(text):
        if key in ("WorkingDirectory", "EnvironmentFile", "ReadWritePaths", "ReadOnlyPaths"):
            named.update(p.lstrip("-") for p in value.split())
        elif key.startswith("Exec"):
            named.add(value.lstrip("-@:+!").split()[0])
    named.update(v for v in unit_environment(text).values() if v.startswith("/"))
    return named


@pytest.mark.parametrize("name", sorted(UNITS))
def test_every_path_a_unit_names_is_made_by_the_unit_or_the_readmes_steps(name):
    """systemd refuses to start a unit whose ReadWritePaths= is missing (226/NAMESPACE),
    and a workspace root nobody made failed every review at its checkout."""
    text, readme = UNITS[name], (ROOT / "README.md").read_text()
    made = unit_made(text)
    for path in unit_paths(text):
        if path.startswith(CHECKOUT + "/") or path in (CHECKOUT, SETTINGS_FILE):
            continue  # the README's steps: checked below
        if path.startswith(("/bin/", "/usr/bin/")):
            assert Path(path).exists() or shutil.which(Path(path).name), path
            continue
        assert path in made, f"{name}: {path} is made by nothing (StateDirectory=...?)"
    assert re.search(r"^\s*ExecStart=/opt/tasuku/\.venv/bin/python ", text, re.M)
    # The README's steps make the user, the settings file and the checkout's .venv.
    host = readme[readme.index("**On a host**") : readme.index("**Stopping and restarting.**")]
    assert re.search(r"^useradd .*\btasuku$", host, re.M)
    assert "install -m 600 /dev/null /etc/tasuku/tasuku.env" in host
    assert "cd /opt/tasuku && make install" in host
    assert re.search(r"^User=tasuku$", text, re.M) and "ReadWritePaths" not in text


def test_web_and_worker_use_the_same_workspace_root_and_checkout_cache():
    """/healthz on the web checks the workspace root the worker's reviews use."""
    web, worker = (unit_environment(UNITS[f"tasuku-{n}.service"]) for n in ("web", "worker"))
    for name in ("TASUKU_WORKSPACE_ROOT", "TASUKU_CHECKOUT_CACHE"):
        assert web[name] == worker[name], name


def rebased(value: str, root: Path) -> str:
    """A path of the host's under `root`; the checkout is this one."""
    if value == CHECKOUT or value.startswith(CHECKOUT + "/"):
        return str(ROOT) + value[len(CHECKOUT) :]
    return str(root / value.lstrip("/")) if value.startswith("/") else value


def started(name: str, root: Path, port: int) -> tuple[dict[str, str], list[list[str]]]:
    """What systemd would do to start the unit, on a host whose / is `root`: make its
    folders, and the environment and commands it runs with, paths under `root`."""
    text = UNITS[name]
    for folder in unit_made(text):
        Path(rebased(folder, root)).mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "GITHUB_", "TASUKU_")) and k != "DATABASE_URL"
    }
    env.update({k: rebased(v, root) for k, v in unit_environment(text).items()})
    settings_file = Path(rebased(SETTINGS_FILE, root))
    for line in settings_file.read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    commands = []
    for key, value in unit_lines(text):
        if key in ("ExecStartPre", "ExecStart"):
            argv = [rebased(a, root) for a in value.split()]
            commands.append([a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in argv])
    return env, commands


def test_the_units_start_on_a_fresh_host_and_the_web_is_ready(tmp_path, migrated_sqlite):
    """The units as systemd starts them, on a host the README's steps prepared: the web's
    ExecStartPre steps succeed, gunicorn answers /healthz ready (the workspace root
    there), and the worker's system checks (run before it starts) pass. (Its database is
    a copy of one the run migrated once, so the unit's `migrate` finds nothing left to
    do: migrating a fresh one is tests/test_production_path.py's first test.)"""
    import secrets
    import socket

    import requests

    settings_file = tmp_path / SETTINGS_FILE.lstrip("/")
    settings_file.parent.mkdir(parents=True)
    shutil.copyfile(migrated_sqlite, tmp_path / "tasuku.sqlite3")
    settings_file.write_text(
        f"SECRET_KEY={secrets.token_urlsafe(50)}\n"
        "TASUKU_BASE_URL=https://tasuku.example.com\nALLOWED_HOSTS=tasuku.example.com\n"
        f"DATABASE_URL=sqlite:///{tmp_path / 'tasuku.sqlite3'}\n"
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env, commands = started("tasuku-web.service", tmp_path, port)
    *before, serve = commands
    for command in before:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,  # noqa: S603
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr[-2000:])
    web = subprocess.Popen(serve, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,  # noqa: S603
                           stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=15)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and web.poll() is None
                time.sleep(0.1)
        assert health.status_code == 200, health.text
    finally:
        web.terminate()
        web.wait(timeout=20)

    env, [worker] = started("tasuku-worker.service", tmp_path, port)
    assert worker[-2:] == ["manage.py", "worker"]
    checked = subprocess.run([*worker[:-1], "check"], cwd=ROOT, env=env, capture_output=True,  # noqa: S603
                             text=True, timeout=120)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    # Without the folders systemd makes, the same check fails, naming the workspace root.
    shutil.rmtree(tmp_path / "var")
    checked = subprocess.run([*worker[:-1], "check"], cwd=ROOT, env=env, capture_output=True,  # noqa: S603
                             text=True, timeout=120)  # fmt: skip
    assert checked.returncode != 0 and "tasuku.E022" in checked.stderr


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    """The units as shipped, the checkout in place of /opt/tasuku (verify checks that
    each program exists); every warning (an unknown key, a bad value) fails."""
    for name, text in UNITS.items():
        (tmp_path / name).write_text(text.replace(CHECKOUT, str(ROOT)))
    verified = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(tmp_path / n) for n in sorted(UNITS))],  # noqa: S607
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert verified.returncode == 0 and not (verified.stdout + verified.stderr).strip(), (
        verified.stdout + verified.stderr
    )


def test_every_make_target_declared_has_a_rule():
    """A phony target with no rule does nothing, silently (`make bench` did)."""
    makefile = (ROOT / "Makefile").read_text()
    declared = re.search(r"^\.PHONY: (.+)$", makefile, re.M).group(1).split()
    for target in declared:
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_composes_variables_are_the_ones_the_readmes_env_sets():
    """Every variable Compose requires (`${NAME:?…}`) is in the README's .env, every
    name there is one Tasuku or Compose reads, and the web service keeps the image's
    health check while the one-shot and worker services turn it off."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"cat > \.env <<'ENV'\n(.*?)\nENV\n", readme, re.S).group(1)
    written = {line.split("=", 1)[0] for line in block.splitlines()}
    required = set(re.findall(r"\$\{(\w+):\?", (ROOT / "compose.yaml").read_text()))
    assert required <= written, required - written
    assert written - required <= READ_FROM_ENVIRONMENT | {"ALLOWED_HOSTS"}
    services = COMPOSE["services"]
    assert "healthcheck" not in services["web"]  # the Dockerfile's HEALTHCHECK
    assert services["migrate"]["healthcheck"] == {"disable": True}
    assert services["worker"]["healthcheck"] == {"disable": True}
