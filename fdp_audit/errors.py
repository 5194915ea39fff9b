"""Errors that the command line turns into a one-line message and exit code 2 (docs/files.md)."""


class BadInputError(Exception):
    """Bad user input: a missing file, malformed YAML, an unknown key, a value out of range, a corrupt
    checkpoint. The message is one line and names the offending field or file."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        self.detail = message
        text = f"{field}: {message}" if field else message
        super().__init__(" ".join(text.split()))


class UserCodeError(BadInputError):
    """The user's code (a training function, a model factory, a third-party mechanism) raised. The message is one
    line naming the error; ``user_traceback`` holds the traceback of the user's own frames (fdp-audit's left
    out), which the command line prints above it."""

    def __init__(self, message: str, field: str | None = None, user_traceback: str = ""):
        super().__init__(message, field)
        self.user_traceback = user_traceback

    def __reduce__(self):  # an executor's worker sends it back pickled: keep the field and the traceback
        return type(self), (self.detail, self.field, self.user_traceback)
