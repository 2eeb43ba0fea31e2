"""Shared test setup: every test gets its own user cache directory.

The profile cache (core/cache.py) lives in ``$XDG_CACHE_HOME/perfcmp-tui``; pointing that at a
fresh folder per test keeps one test's cache from answering for another and keeps test runs out
of the developer's real ``~/.cache``. Subprocesses started by a test inherit the setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_cache(tmp_path_factory: pytest.TempPathFactory,
                         monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("xdg_cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home
