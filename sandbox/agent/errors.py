"""Provider failures as Tasuku errors: what the operator must fix (permanent) and what
a later attempt may get past (transient). Both SDKs raise `APIStatusError` with the
HTTP status, and connection/timeout errors; the status decides."""

from __future__ import annotations

from sandbox.errors import ProviderError

PERMANENT = {
    400: "rejected the request",
    401: "refused the API key",
    402: "refused to bill the request",
    403: "refused the API key's permissions",
    404: "does not know the model",
    413: "found the request too large",
    422: "rejected the request",
}
# Their codes (tasuku/errors.py).
PERMANENT_CODES = {
    400: "provider-rejected",
    401: "provider-key",
    402: "provider-billing",
    403: "provider-key",
    404: "provider-model",
    413: "provider-rejected",
    422: "provider-rejected",
}


def provider_error(provider: str, model: str, exc: Exception) -> ProviderError:
    """The ProviderError for an SDK exception `exc` (anthropic.* or openai.*)."""
    status = getattr(exc, "status_code", None)
    message = _message(exc)
    if isinstance(status, int):
        if status in PERMANENT:
            what = PERMANENT[status]
            if status == 404:
                what = f"does not know the model {model!r}"
            return ProviderError(
                f"The {provider} API {what} (HTTP {status}): {message}",
                permanent=True,
                code=PERMANENT_CODES[status],
            )
        return ProviderError(
            f"The {provider} API answered HTTP {status} after retries: {message}",
            permanent=False,
            code="provider-unavailable",
        )
    name = type(exc).__name__
    if name in ("APITimeoutError", "APIConnectionError"):
        return ProviderError(
            f"Could not reach the {provider} API: {message}",
            permanent=False,
            code="provider-unavailable",
        )
    if name == "APIResponseValidationError" or isinstance(exc, ValueError):
        return ProviderError(
            f"The {provider} API answered with something that is not a valid response: {message}",
            permanent=False,
            code="provider-bad-response",
        )
    return ProviderError(
        f"The {provider} API call failed: {name}: {message}",
        permanent=False,
        code="provider-error",
    )


def _message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if body.get("message"):
            return str(body["message"])[:500]
    return (str(getattr(exc, "message", "") or exc) or type(exc).__name__)[:500]
