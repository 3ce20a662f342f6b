"""A Turnlog opened where a file it would make has no folder: refused before anything is made."""

from __future__ import annotations

import pytest

from turnlog import StoreError, Turnlog


def test_a_views_file_in_a_missing_folder_is_refused_before_the_log_is_made(tmp_path):
    with pytest.raises(StoreError, match="missing/v.db: directory .* does not exist"):
        Turnlog(str(tmp_path / "new.db"), views=str(tmp_path / "missing" / "v.db"))
    assert list(tmp_path.iterdir()) == []


def test_a_log_in_a_missing_folder_is_refused_and_nothing_is_made(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        Turnlog(str(tmp_path / "missing" / "new.db"))
    assert list(tmp_path.iterdir()) == []
