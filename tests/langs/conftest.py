"""A test of tests/langs/ runs for each language of its `slug` parametrization (session-scoped:
pytest then runs all the tests of one language together, whatever their module, and they share
one server). Fixture names of their own (`lang`, `lang_server`), so that nothing below this
folder loses tests/conftest.py's `server`."""

from __future__ import annotations

import pytest

from langcase import LANGS, Lang


@pytest.fixture(scope="session")
def lang(slug: str) -> Lang:
    return LANGS[slug]


@pytest.fixture(scope="session")
def lang_server(lang: Lang):
    """A server of `lang` only (two slots); every test of the language is skipped, saying why,
    where the host lacks what it needs."""
    yield from lang.serve()
