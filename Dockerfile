# Tasuku's image: the web process by default; the worker is the same image with
# `python manage.py worker` (compose.yaml runs both, and the migration once).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git fetches the pull requests; tini, PID 1, reaps the engines' child processes and
# passes the stop signal on to the process group (-g): every process of the web server or
# the worker stops gracefully at once (docs/operations.md, *Stopping*).
RUN apt-get update \
    && apt-get install --yes --no-install-recommends git tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin tasuku

WORKDIR /app

# The dependencies first, in a layer of their own: rebuilt only when pyproject.toml
# changes. (The static reviewer's tools — ruff, detect-secrets, shellcheck — are among
# them, and Redis's client, for TASUKU_REDIS_URL.)
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['redis']))" > /tmp/requirements.txt \
    && pip install --requirement /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY --chown=tasuku:tasuku . .

# The static files are collected into the image (whitenoise serves them). A throwaway
# key, so that no key is generated into the image.
ENV TASUKU_STATIC_ROOT=/app/staticfiles \
    TASUKU_WORKSPACE_ROOT=/var/lib/tasuku/workspaces \
    TASUKU_CHECKOUT_CACHE=/var/lib/tasuku/mirrors
RUN SECRET_KEY="collectstatic-only-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
        python manage.py collectstatic --noinput --verbosity 0 \
    && mkdir -p /var/lib/tasuku/workspaces /var/lib/tasuku/mirrors \
    && chown -R tasuku:tasuku /var/lib/tasuku

USER tasuku
VOLUME /var/lib/tasuku
EXPOSE 8000

# Ready: the database answers, the static files are there, the schedules are registered.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["/usr/bin/tini", "-g", "--"]
CMD ["python", "-m", "gunicorn", "tasuku.wsgi", "--config", "python:tasuku.gunicorn_config", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "4", "--graceful-timeout", "10", "--access-logfile", "-"]
