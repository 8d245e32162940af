"""The runner API: a GitHub Actions runner Tasuku dispatched fetches its review job, has
Tasuku make its engine's connector calls, and posts the result back, authenticated by
its GitHub Actions OIDC token (`Authorization: Bearer <token>`, audience = Tasuku's URL).

Anything that does not prove to be the dispatched run, still waiting, is answered 403
with the same body whatever the reason (the reason goes to the log).
"""

from __future__ import annotations

import logging

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from repos import github
from reviews.actions import oidc
from reviews.actions import workflow as actions
from reviews.actions.connectors import connector_call_for
from reviews.scope import secondaries
from sandbox.contract import ReviewJob

logger = logging.getLogger(__name__)

FORBIDDEN = {"error": "Forbidden."}


class JobSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["review", "cancelled"])
    run = serializers.IntegerField(help_text="Tasuku's run id.")
    reason = serializers.CharField(help_text="Why the run was cancelled (empty otherwise).")
    engine = serializers.CharField(required=False, help_text="The engine to run.")
    head_sha = serializers.CharField(required=False, help_text="The commit to review.")
    job = serializers.JSONField(required=False, help_text="The ReviewJob (see the contract).")
    secondaries = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="For each secondary repository of the job the App can read now: "
        "`full_name`, `commit`, `path`, `clone_url`, and `token` (Contents: read on that one "
        "repository, for git alone: never given to the engine) with `api_url` to revoke it.",
    )


class ResultInSerializer(serializers.Serializer):
    result = serializers.JSONField(required=False, help_text="A ReviewResult.")
    failure = serializers.CharField(
        required=False, max_length=4000, help_text="Why the runner could not review."
    )


class ResultOutSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["accepted", "already accepted", "failed"])
    run = serializers.IntegerField()


def _unavailable(exc: Exception) -> Response:
    """GitHub could not say which workflow run the token's is (a run dispatched without
    its id): the runner tries again."""
    logger.warning("runner not matched yet: %s", exc)
    return Response(
        {"error": "GitHub cannot be asked which run this is now; try again."},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )


def _secondaries_for(run) -> list[dict]:
    """How the runner reads the job's secondary repositories: a token of its own for
    each, minted now (reviews/scope/secondaries.py). Only the runner the OIDC token proved to
    be is given them."""
    job = ReviewJob.model_validate(run.dispatch.job)
    if not job.secondaries:
        return []
    try:
        gateway = github.gateway()
    except github.GitHubNotConfigured as exc:
        logger.warning("run %s: no tokens for its secondary repositories: %s", run.pk, exc)
        return []
    return secondaries.runner_access(gateway, job)


class _RunnerView(APIView):
    authentication_classes: list = []
    permission_classes = (AllowAny,)

    def claims(self, request: Request) -> dict | Response:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Response(FORBIDDEN, status=status.HTTP_403_FORBIDDEN)
        try:
            return oidc.verify(token.strip())
        except oidc.IssuerUnavailable as exc:
            logger.warning("runner token not checked: %s", exc)
            return Response(
                {"error": "GitHub's OIDC keys cannot be read now; try again."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        except oidc.TokenRefused as exc:
            logger.warning("runner token refused: %s", exc)
            return Response(FORBIDDEN, status=status.HTTP_403_FORBIDDEN)


class RunnerJobView(_RunnerView):
    @extend_schema(
        request=None,
        responses={
            200: JobSerializer,
            403: OpenApiResponse(description="Not the dispatched run, or it is not waiting"),
            503: OpenApiResponse(description="GitHub cannot say which run this is now"),
        },
        description="The review job of the workflow run the OIDC token proves to be.",
    )
    def post(self, request: Request) -> Response:
        claims = self.claims(request)
        if isinstance(claims, Response):
            return claims
        try:
            answer = actions.job_for(claims)
        except actions.Refused as exc:
            logger.warning("runner job refused: %s", exc)
            return Response(FORBIDDEN, status=status.HTTP_403_FORBIDDEN)
        except actions.Unavailable as exc:
            return _unavailable(exc)
        run = answer.run
        body = {"status": answer.status, "run": run.pk, "reason": answer.reason}
        if answer.status == "review":
            body.update(
                engine=run.reviewer.engine,
                head_sha=run.head_sha,
                job=run.dispatch.job,
                secondaries=_secondaries_for(run),
            )
        return Response(body)


class RunnerResultView(_RunnerView):
    @extend_schema(
        request=ResultInSerializer,
        responses={
            200: ResultOutSerializer,
            400: OpenApiResponse(description="Not a ReviewResult: the run fails"),
            403: OpenApiResponse(description="Not the dispatched run, or it is not waiting"),
            503: OpenApiResponse(description="GitHub cannot say which run this is now"),
        },
        description=(
            "The runner's ReviewResult (or `failure`), accepted once: a repeat answers "
            "`already accepted` and changes nothing."
        ),
    )
    def post(self, request: Request) -> Response:
        claims = self.claims(request)
        if isinstance(claims, Response):
            return claims
        body = request.data if isinstance(request.data, dict) else {}
        try:
            answer = actions.result_accept(claims, body)
        except actions.Refused as exc:
            logger.warning("runner result refused: %s", exc)
            return Response(FORBIDDEN, status=status.HTTP_403_FORBIDDEN)
        except actions.Unavailable as exc:
            return _unavailable(exc)
        except ValueError as exc:
            return Response({"error": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"status": answer.status, "run": answer.run.pk})


class ConnectorInSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="The connector, as the job names it.")
    input = serializers.JSONField(required=False, help_text="The model's input for it.")


class ConnectorOutSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "refused", "failed"])
    content = serializers.CharField(help_text="The system's answer, or why there is none.")
    duration_ms = serializers.IntegerField()
    bytes = serializers.IntegerField(help_text="Bytes read from the system.")


class RunnerConnectorView(_RunnerView):
    @extend_schema(
        request=ConnectorInSerializer,
        responses={
            200: ConnectorOutSerializer,
            403: OpenApiResponse(description="Not the dispatched run"),
            503: OpenApiResponse(description="GitHub cannot say which run this is now"),
        },
        description=(
            "One connector call of the run's engine, made by Tasuku with the credential it "
            "holds. A call Tasuku refuses (invalid input, a connector the reviewer may not "
            "use, the run no longer waiting for its result) or that fails is answered 200 "
            "with `refused` or `failed` and why: the model reads it."
        ),
    )
    def post(self, request: Request) -> Response:
        claims = self.claims(request)
        if isinstance(claims, Response):
            return claims
        body = request.data if isinstance(request.data, dict) else {}
        try:
            answer = connector_call_for(claims, body)
        except actions.Refused as exc:
            logger.warning("runner connector call refused: %s", exc)
            return Response(FORBIDDEN, status=status.HTTP_403_FORBIDDEN)
        except actions.Unavailable as exc:
            return _unavailable(exc)
        return Response(answer.model_dump(mode="json"))
