"""``moescope ingest``, ``token`` and ``db`` straight against the database, in-process
(``cli.main.main``), on both databases."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from api_helpers import row_counts, small_report
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.repository import tokens
from cli.main import main
from db.migrate import head_revision

Body = dict[str, Any]


@pytest.fixture
def db(engine: Engine, database_url: str) -> list[str]:
    """The --database-url option for this test's (emptied afterwards) database."""
    return ["--database-url", database_url]


def _write(path: Path, body: Any) -> Path:
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def test_ingest_good_and_bad_files(
    db: list[str], tmp_path: Path, reference: Body, session: Session,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = _write(tmp_path / "good.json", small_report(reference, 3))
    broken = small_report(reference, 4)
    broken["cases"][3]["layerMS"] = 0
    del broken["cases"][1]["id"]
    bad = _write(tmp_path / "bad.json", broken)
    missing = tmp_path / "missing.json"

    assert main(["ingest", str(bad), str(good), str(missing), *db]) == 1
    out, err = capsys.readouterr()
    assert f"{good}: stored as report " in out and "(3 cases)" in out
    assert f"{bad}: rejected, 2 problem(s):" in err
    assert "  cases[1].id: field required" in err.splitlines()
    assert "  cases[3].layerMS: must be > 0" in err.splitlines()
    assert f"{missing}: cannot read" in err
    assert "1 of 3 file(s) loaded" in err
    assert row_counts(session)[:2] == (1, 3)

    # Again: the good file is recognised, and alone it succeeds.
    assert main(["ingest", str(good), *db]) == 0
    out, err = capsys.readouterr()
    assert f"{good}: already stored as report " in out
    assert "1 of 1 file(s) loaded" in err
    assert row_counts(session)[:2] == (1, 3)


def test_ingest_malformed_and_non_finite_files(
    db: list[str], tmp_path: Path, reference: Body, session: Session,
    capsys: pytest.CaptureFixture[str],
) -> None:
    truncated = _write(tmp_path / "truncated.json", json.dumps(reference)[:500])
    text = json.dumps(small_report(reference, 2)).replace('"layerMS": ', '"layerMS": NaN, "x": ', 1)
    nan = _write(tmp_path / "nan.json", text)

    assert main(["ingest", str(truncated), str(nan), *db]) == 1
    err = capsys.readouterr().err
    assert f"{truncated}: rejected, 1 problem(s):" in err
    assert "  <root>: malformed JSON: " in err
    assert "  cases[0].layerMS: must be a finite number (not NaN or Infinity)" in err.splitlines()
    assert row_counts(session) == (0, 0, 0)


def test_ingest_the_whole_reference(
    db: list[str], tmp_path: Path, reference: Body, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "ref.json", reference)
    assert main(["ingest", str(path), *db]) == 0
    assert "(63 cases)" in capsys.readouterr().out


def test_token_create_list_revoke(
    db: list[str], session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "create", "ci-runner", "--scope", "ingest", *db]) == 0
    out, err = capsys.readouterr()
    token = out.splitlines()[-1]
    assert out == token + "\n"  # the token alone on stdout; the rest on stderr
    assert re.fullmatch(r"msc_[A-Za-z0-9_-]{40,}", token)
    assert "ci-runner" in err and "ingest" in err
    row = tokens.find_active(session, token)
    assert row is not None and row.scope == "ingest" and row.name == "ci-runner"

    assert main(["token", "create", "admin-1", "--scope", "admin", *db]) == 0
    admin_token = capsys.readouterr().out.splitlines()[-1]
    assert admin_token != token

    assert main(["token", "list", *db]) == 0
    listing = capsys.readouterr().out
    assert "ci-runner" in listing and "admin-1" in listing
    assert token not in listing and admin_token not in listing
    assert token[4:20] not in listing

    # Revoke by name, then by id.
    assert main(["token", "revoke", "ci-runner", *db]) == 0
    assert f"revoked token {row.id} (ci-runner)" in capsys.readouterr().out
    session.expire_all()
    assert tokens.find_active(session, token) is None
    admin_row = tokens.find_active(session, admin_token)
    assert admin_row is not None
    session.rollback()
    assert main(["token", "revoke", str(admin_row.id), *db]) == 0
    assert f"revoked token {admin_row.id} (admin-1)" in capsys.readouterr().out
    session.expire_all()
    assert tokens.find_active(session, admin_token) is None
    session.rollback()

    assert main(["token", "revoke", "ci-runner", *db]) == 1  # already revoked
    assert "no active token" in capsys.readouterr().err
    assert main(["token", "list", *db]) == 0
    revoked_lines = [line for line in capsys.readouterr().out.splitlines()[1:]
                     if line.rstrip().endswith("-")]
    assert revoked_lines == []  # both show a revocation time


def test_token_create_rejects_an_unknown_scope(
    db: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["token", "create", "x", "--scope", "root", *db])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_db_upgrade_and_current(db: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    head = head_revision()
    assert main(["db", "upgrade", *db]) == 0
    assert f"database at revision {head} (head {head})" in capsys.readouterr().out
    assert main(["db", "current", *db]) == 0
    assert capsys.readouterr().out.strip() == f"database at revision {head} (head {head})"


def test_commands_on_an_unmigrated_database_say_what_to_do(
    tmp_path: Path, reference: Body, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    report = _write(tmp_path / "r.json", small_report(reference, 1))
    assert main(["token", "create", "x", "--scope", "read", "--database-url", url]) == 2
    assert main(["ingest", str(report), "--database-url", url]) == 2
    err = capsys.readouterr().err.splitlines()
    expected = (f"error: the database is at revision none (empty), not the head "
                f"{head_revision()}: run `moescope db upgrade` first")
    assert err == [expected, expected]

    assert main(["db", "upgrade", "--database-url", url]) == 0
    assert main(["token", "create", "x", "--scope", "read", "--database-url", url]) == 0


def test_serve_serves_the_database_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from app.core.config import get_settings
    from app.core.db import get_engine

    url = f"sqlite:///{tmp_path / 'served.db'}"
    monkeypatch.setenv("MOESCOPE_DATABASE_URL", f"sqlite:///{tmp_path / 'other.db'}")
    get_settings.cache_clear()
    served: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: served.append(
        str(get_engine().url)))
    try:
        assert main(["serve", "--database-url", url]) == 0
    finally:
        get_settings.cache_clear()  # monkeypatch restores the environment; forget ours
    assert served == [url]
