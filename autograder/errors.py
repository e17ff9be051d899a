"""The one exception type the CLI turns into a one-line error message."""


class KitError(Exception):
    """A problem with the user's input or the kit's files, stated in one line."""
