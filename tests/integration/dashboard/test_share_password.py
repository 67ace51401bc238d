"""Share mode's meeting password fails closed: a secrets file that cannot be read never means "no password"."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.password import PasswordError, log_no_password, meeting_password, secrets_files
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
BROKEN = 'sago_password = "meeting-2026\n'  # the T18 input: the closing quote is missing
VALID = 'sago_password = "meeting-2026"\n'


def _file(tmp_path, text: str | bytes, name: str = "secrets.toml") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return p


# ------------------------------------------------------------------ the decision
def test_a_valid_password_is_read_and_absence_is_no_password(tmp_path):
    assert meeting_password([_file(tmp_path, VALID)]) == "meeting-2026"
    assert meeting_password([]) is None
    assert meeting_password([tmp_path / "absent.toml"]) is None  # no file: no password
    assert meeting_password([_file(tmp_path, 'other = "x"\n', "other.toml")]) is None  # no key: no password


@pytest.mark.parametrize("text, why", [
    (BROKEN, "Illegal character|Unterminated"),
    ("sago_password = 1234\n", "must be a non-empty string, not a int"),
    ('sago_password = ""\n', "must be a non-empty string, not an empty string"),
    ('sago_password = "   "\n', "must be a non-empty string"),
    ('sago_password = ["meeting-2026"]\n', "not a list"),
    ("[sago_password]\nvalue = 'x'\n", "not a dict"),
    (b'sago_password = "caf\xe9"\n', "codec can't decode"),
    ('sago_password = "ok"\nsago_password = "twice"\n', "Cannot overwrite"),
])
def test_a_password_that_cannot_be_read_refuses(tmp_path, text, why):
    f = _file(tmp_path, text)
    with pytest.raises(PasswordError, match=r"^cannot read the meeting password from .*secrets\.toml: ") as e:
        meeting_password([tmp_path / "absent.toml", f])
    assert re.search(why, str(e.value)), str(e.value)
    assert "1234" not in str(e.value) and "caf" not in str(e.value)  # the value itself is never echoed


def test_an_unreadable_secrets_file_refuses(tmp_path):
    (tmp_path / "secrets.toml").mkdir()  # exists, cannot be read as a file
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "gone.toml")
    for f in (tmp_path / "secrets.toml", tmp_path / "dangling.toml", tmp_path / "absent-folder"):
        with pytest.raises(PasswordError, match="cannot read the meeting password from"):
            meeting_password([f])


def test_a_broken_file_refuses_even_when_another_file_has_a_password(tmp_path):
    good = _file(tmp_path, VALID, "home.toml")
    bad = _file(tmp_path, BROKEN)
    with pytest.raises(PasswordError):
        meeting_password([good, bad])
    later = _file(tmp_path, 'sago_password = "later-wins"\n', "later.toml")
    assert meeting_password([good, later]) == "later-wins"  # Streamlit's order: a later file wins


def test_a_secrets_folder_holds_the_password_in_one_file(tmp_path):
    (tmp_path / "sec" / "sago_password").mkdir(parents=True)
    (tmp_path / "sec" / "sago_password" / "value").write_text("folder-pw\n")
    assert meeting_password([tmp_path / "sec"]) == "folder-pw"
    (tmp_path / "sec" / "sago_password" / "second").write_text("x")
    with pytest.raises(PasswordError, match="one file"):
        meeting_password([tmp_path / "sec"])


def test_no_password_is_logged_once(caplog, monkeypatch):
    import dashboard.password as pw

    monkeypatch.setattr(pw, "_logged", False)
    with caplog.at_level(logging.WARNING, logger="sago.dashboard"):
        log_no_password(["/nowhere/secrets.toml"])
        log_no_password(["/nowhere/secrets.toml"])
    assert [r.getMessage() for r in caplog.records].count(
        "share mode without a meeting password: no sago_password in /nowhere/secrets.toml") == 1


def test_the_files_checked_are_the_ones_streamlit_reads(tmp_path):
    assert secrets_files(["--server.port", "1", "--secrets.files", "a.toml", "--secrets.files=b.toml"], {}) == [
        "a.toml", "b.toml"]
    assert secrets_files([], {"STREAMLIT_SECRETS_FILES": "x.toml y.toml"}) == ["x.toml", "y.toml"]
    default = secrets_files([], {})
    assert default[-1].endswith(".streamlit/secrets.toml") and len(default) == 2


def test_the_shell_check_refuses_a_broken_file(tmp_path):
    bad = _file(tmp_path, BROKEN)
    r = subprocess.run([sys.executable, "-m", "dashboard.password", "--secrets.files", str(bad)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cannot read the meeting password from" in r.stderr
    ok = subprocess.run([sys.executable, "-m", "dashboard.password", "--secrets.files", str(_file(tmp_path, VALID,
                        "ok.toml"))], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr


# ------------------------------------------------------------------ the gate in the app (headless)
@pytest.fixture
def secrets_option():
    """Point Streamlit's ``secrets.files`` at a file for one test (the gate reads the option)."""
    from streamlit import config

    before = config.get_option("secrets.files")

    def set_to(path: Path) -> None:
        config.set_option("secrets.files", [str(path)])

    yield set_to
    config.set_option("secrets.files", before)


def _share_app(tmp_path, monkeypatch) -> AppTest:
    share = tmp_path / "share"
    share.mkdir()
    make_store(share / "md.duckdb")
    monkeypatch.setenv("SAGO_SHARE_DIR", str(share))
    monkeypatch.delenv("SAGO_STORE", raising=False)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["store"] = "md.duckdb"
    return at


def test_share_mode_with_a_broken_secrets_file_serves_nothing(tmp_path, monkeypatch, secrets_option):
    secrets_option(_file(tmp_path, BROKEN))
    at = _share_app(tmp_path, monkeypatch).run()
    assert not at.exception, at.exception
    assert any("cannot read the meeting password from" in e.value for e in at.error)
    assert not at.text_input and not at.dataframe and not at.get("plotly_chart") and not at.title


def test_share_mode_with_a_valid_password_asks_for_it(tmp_path, monkeypatch, secrets_option):
    secrets_option(_file(tmp_path, VALID))
    at = _share_app(tmp_path, monkeypatch).run()
    assert not at.exception, at.exception
    assert [t.label for t in at.text_input] == ["Password"] and not at.dataframe and not at.title
    at.text_input[0].input("meeting-2026").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Model profiles"] and at.dataframe
