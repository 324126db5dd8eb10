"""The bearer token: required on every route but `GET /v1/health` when the server has one.

The comparison takes the same time whatever the guess (`hmac.compare_digest`). The OpenAPI schema
always declares the scheme, so it does not depend on how one server was started.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from fairness.serve._errors import Refused
from fairness.serve._settings import TOKEN_ENV, ServeSettings

BEARER = HTTPBearer(auto_error=False, description=f"The server's token ({TOKEN_ENV}); required unless the server runs "
                                                  "without one, which it may only on 127.0.0.1, ::1 or localhost.")


def token_check(settings: ServeSettings) -> Callable[..., None]:
    """A FastAPI dependency: 401 without the right `Authorization: Bearer …` when `settings` has a token."""
    expected = settings.token.get_secret_value().encode() if settings.token is not None else None

    def check(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]) -> None:
        if expected is None:
            return
        if credentials is None:
            raise Refused(401, "this server needs a bearer token: send `Authorization: Bearer <token>`",
                          headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(credentials.credentials.encode(), expected):
            raise Refused(401, "the bearer token is not this server's", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})

    return check
