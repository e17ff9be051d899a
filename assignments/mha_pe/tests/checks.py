"""Helpers the public tests share."""

import pytest


def must_raise_value_error(call, what):
    """``call()`` must raise ValueError; anything else fails naming ``what``."""
    try:
        call()
    except ValueError:
        return
    except Exception as error:  # noqa: BLE001 - the wrong exception is a failure, with its name
        pytest.fail(f"{what} must raise ValueError, not {type(error).__name__}: {error}")
    pytest.fail(f"{what} must raise ValueError")
