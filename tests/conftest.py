"""Fixtures several test files share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty $GPUWISE_CONFIG_DIR: no test sees the developer's ~/.config/gpuwise."""
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(config))
    return config
