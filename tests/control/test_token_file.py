"""The control token's file is never reached through a symbolic link, and a token the user
chose is never printed (docs/security.md) [ours]. ``forewarn serve`` over real processes:
tests/e2e/test_e2e_control_token.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from forewarn.control_token import (
    TokenFileError,
    find_token,
    remove_token,
    token_file,
    write_token,
)
from forewarn.server.runner import ServeSettings, control_line


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FOREWARN_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv("FOREWARN_TOKEN", raising=False)
    return tmp_path / "runtime"


def test_the_file_is_replaced_whole_and_readable_by_its_user_only(runtime: Path) -> None:
    path = write_token("127.0.0.1", 16955, "first")
    path.chmod(0o644)  # an older file with other bits
    assert write_token("127.0.0.1", 16955, "second") == path
    assert path.read_text() == "second\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert find_token("127.0.0.1", 16955) == "second"
    assert sorted(p.name for p in runtime.iterdir()) == [path.name], "no temporary file left"


def test_a_link_at_the_file_or_its_directory_is_refused_and_not_followed(
    runtime: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    precious.chmod(0o644)
    runtime.mkdir()
    token_file("127.0.0.1", 1).symlink_to(precious)
    with pytest.raises(TokenFileError, match="it is a symbolic link"):
        write_token("127.0.0.1", 1, "secret")
    assert find_token("127.0.0.1", 1) is None, "a client reads no token through a link"
    assert precious.read_text() == "mine\n"
    assert stat.S_IMODE(precious.stat().st_mode) == 0o644

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked-runtime"
    linked.symlink_to(elsewhere)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FOREWARN_RUNTIME_DIR", str(linked))
        with pytest.raises(TokenFileError, match=r"linked-runtime: it is a symbolic link"):
            write_token("127.0.0.1", 2, "secret")
    assert list(elsewhere.iterdir()) == []


def test_the_start_up_line_shows_a_made_up_token_only(tmp_path: Path) -> None:
    path = tmp_path / "control.token"
    made_up = control_line(ServeSettings(), "generated", path)
    assert (
        made_up
        == f"  control: http://127.0.0.1:16955/?token=generated (the token is also in {path})"
    )
    chosen = control_line(ServeSettings(token="chosen"), "chosen", path)
    assert "chosen" not in chosen.replace("--token", "")
    assert str(path) in chosen


def test_a_stopping_server_removes_its_own_token_only(runtime: Path) -> None:
    """``serve`` removes its token file as it stops cleanly, unless the file now holds
    another server's token (tests/cli/test_serve_stops_cleanly.py runs both through real
    processes)."""
    path = write_token("127.0.0.1", 16955, "mine")
    assert remove_token("127.0.0.1", 16955, "mine")
    assert not path.exists()
    assert not remove_token("127.0.0.1", 16955, "mine"), "nothing left to remove"
    write_token("127.0.0.1", 16955, "another server's")
    assert not remove_token("127.0.0.1", 16955, "mine")
    assert find_token("127.0.0.1", 16955) == "another server's"
