"""A method a path does not have is answered 405 with `Allow` naming every method the path has (RFC 9110
15.5.6), on every path of the OpenAPI document: Starlette alone names only the first route's methods, which
on a path served by several routes (GET and POST /silences, GET and PUT /alerts/rules, ...) hides the rest."""

from __future__ import annotations

import re

import pytest

from backend.api.app import create_app
from backend.config import Settings

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
DOC = create_app(Settings(_env_file=None)).openapi()


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)  # an id (or a model name) that fits every path parameter


def test_the_document_has_multi_method_paths():
    multi = [p for p, ops in DOC["paths"].items() if len(ops) > 1]
    assert len(multi) >= 6, multi  # the check below covers them, and every other path too


@pytest.mark.parametrize("path", sorted(DOC["paths"]))
def test_405_lists_every_method_of_the_path(client, path):
    documented = sorted(m.upper() for m in DOC["paths"][path])
    for method in METHODS:
        if method in documented:
            continue
        r = client.request(method, _concrete(path))
        assert r.status_code == 405, (method, path, r.status_code, r.text)
        assert sorted(m.strip() for m in r.headers["Allow"].split(",")) == documented, (method, path)
        assert r.json() == {"detail": "Method Not Allowed"}
