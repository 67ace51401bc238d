"""The share-mode meeting password, read from Streamlit's secrets files; fail closed.

``sago_password = "…"`` in ``.streamlit/secrets.toml`` (or any file of Streamlit's option
``secrets.files``; later files win, as in Streamlit) makes share mode ask for it. A password that
cannot be read must never mean "no password": a secrets file that exists but does not parse (a
missing quote), cannot be read, or gives ``sago_password`` a value that is not a non-empty string
(``sago_password = 1234``) raises ``PasswordError``, and share mode refuses to serve
(``scripts/dashboard.sh --share`` before the server starts, ``frame.password_gate`` before a page
is drawn). Only when no secrets file exists, or none has the key, is there no password, and that
is logged once per process. Pure functions apart from the log; no Streamlit session.

``python -m dashboard.password [--secrets.files PATH …]`` runs the same check from the shell:
exit status 2 and the message on stderr when the password cannot be read.
"""

from __future__ import annotations

import logging
import os
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from dashboard.access import PASSWORD_SECRET
from sago_engine.textsafe import guarded_terminal, terminal

_log = logging.getLogger("sago.dashboard")
_logged = False


class PasswordError(RuntimeError):
    """The meeting password exists but cannot be read: share mode must not serve."""


def _shown(path: Path) -> str:
    """``path`` as the host knows it: relative to the working folder or ``~`` when inside them."""
    p = Path(path).absolute()
    for base, prefix in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            return prefix + str(p.relative_to(base))
        except ValueError:
            continue
    return str(p)


def _from_folder(folder: Path) -> tuple[bool, object]:
    """Streamlit's folder form of secrets: ``<folder>/sago_password/<one file>`` holds the text."""
    sub = folder / PASSWORD_SECRET
    if not sub.exists():
        return False, None
    files = [f for f in sub.iterdir() if f.is_file()] if sub.is_dir() else []
    if len(files) != 1:
        raise ValueError(f"{PASSWORD_SECRET} must be a folder holding one file")
    return True, files[0].read_text(encoding="utf-8").strip()


def meeting_password(files: Iterable[str | os.PathLike]) -> str | None:
    """The meeting password from the secrets ``files`` (in Streamlit's order: a later file wins).

    Args:
        files: secrets locations (``.toml`` files or Kubernetes-style folders), e.g. Streamlit's
            ``secrets.files``; a ``.toml`` file that does not exist is skipped.
    Returns:
        The password, or None when no location exists or none defines ``sago_password``.
    Raises:
        PasswordError: "cannot read the meeting password from <file>: <error>" — an existing file
            does not parse as TOML (or UTF-8) or cannot be read (a dangling link, a folder), a
            location is neither a ``.toml`` file nor a folder, or ``sago_password`` is present but
            not a non-empty string.
    """
    found: tuple[Path, object] | None = None
    for f in map(Path, files):
        try:  # as Streamlit reads them: a *.toml path is a file, any other path a folder
            if f.name.endswith(".toml"):
                if not f.exists() and not f.is_symlink():
                    continue
                data = tomllib.loads(f.read_text(encoding="utf-8"))
                has, value = PASSWORD_SECRET in data, data.get(PASSWORD_SECRET)
            elif f.is_dir():
                has, value = _from_folder(f)
            else:
                raise ValueError("not a .toml file or a folder")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as e:
            raise PasswordError(f"cannot read the meeting password from {_shown(f)}: {e}") from None
        if has:
            found = (f, value)
    if found is None:
        return None
    f, value = found
    if not isinstance(value, str) or not value.strip():
        what = "an empty string" if isinstance(value, str) else f"a {type(value).__name__}"
        raise PasswordError(f"cannot read the meeting password from {_shown(f)}: {PASSWORD_SECRET} must be a "
                            f"non-empty string, not {what}")
    return value


def log_no_password(files: Sequence[str | os.PathLike]) -> None:
    """Log once per process that share mode serves without a password (no file, or no key)."""
    global _logged
    if not _logged:
        _logged = True
        _log.warning("share mode without a meeting password: no %s in %s", PASSWORD_SECRET,
                     ", ".join(_shown(Path(f)) for f in files) or "any secrets file")


def secrets_files(argv: Sequence[str] = (), environ: Mapping[str, str] = os.environ) -> list[str]:
    """The secrets locations a ``streamlit run`` with these arguments reads: ``--secrets.files``
    values in ``argv``, else ``$STREAMLIT_SECRETS_FILES`` (space-separated), else Streamlit's
    configured ``secrets.files`` (``~/.streamlit/secrets.toml`` and ``./.streamlit/secrets.toml``)."""
    given: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--secrets.files":
            given.append(next(it, ""))
        elif a.startswith("--secrets.files="):
            given.append(a.split("=", 1)[1])
    if given:
        return [g for g in given if g]
    if environ.get("STREAMLIT_SECRETS_FILES", "").strip():
        return environ["STREAMLIT_SECRETS_FILES"].split()
    from streamlit import config

    return list(config.get_option("secrets.files"))


def main(argv: Sequence[str]) -> int:
    """Shell check before a share-mode server starts: 0 when the password is readable or absent, else 2."""
    try:
        meeting_password(secrets_files(argv))
    except PasswordError as e:
        print(f"sago: refusing to share: {terminal(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        sys.exit(main(sys.argv[1:]))
