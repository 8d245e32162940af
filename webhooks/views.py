"""`POST /webhooks/github` as a Django view: the intake (webhooks/intake.py) for any way
Django is served without the WSGI door in front (webhooks/wsgi.py), and for Django's
test client."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from webhooks.intake import intake


@csrf_exempt
@require_POST
def github_webhook(request: HttpRequest) -> HttpResponse:
    answer = intake(request.META, request.read)
    response = HttpResponse(answer.content(), status=answer.status, content_type="application/json")
    for name, value in answer.headers:
        response[name] = value
    return response
