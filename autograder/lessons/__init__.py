"""The lessons this kit grades, each a folder with its descriptor (``assignment.toml``)."""
