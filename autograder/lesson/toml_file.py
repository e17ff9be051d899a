"""A lesson's TOML file read, or one line that says why not (every lesson file: descriptor, catalogue,
promises)."""

import tomllib
from pathlib import Path

from ..errors import KitError


def read_toml(path: Path, what: str) -> dict:
    """The parsed ``path``; a one-line KitError naming ``what`` it is ("assignment descriptor") when it cannot be
    read or parsed."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise KitError(f"{what} not readable: {path} ({error.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise KitError(f"{what} {path}: {error}") from None
