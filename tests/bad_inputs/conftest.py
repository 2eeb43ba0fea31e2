"""Every bad-input test runs with its own user cache directory, so the profile cache of one test
(or of the developer's real ~/.cache) can never answer for another."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_CACHE_HOME`` for this test, outside ``tmp_path`` (tests inspect that folder)."""
    home = tmp_path_factory.mktemp("xdg_cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home
