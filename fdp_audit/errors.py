"""Errors that the command line turns into a one-line message and exit code 2 (docs/files.md)."""


class BadInputError(Exception):
    """Bad user input: a missing file, malformed YAML, an unknown key, a value out of range, a corrupt
    checkpoint. The message is one line and names the offending field or file."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        self.detail = message
        text = f"{field}: {message}" if field else message
        super().__init__(" ".join(text.split()))
