"""Errors that carry a message meant for a person, not a traceback."""


class FedcoreError(Exception):
    """Base class: the message is shown to the user as it is."""


class DataError(FedcoreError):
    """The data cannot be turned into a usable federation (names the site / column / row)."""


class SpecError(FedcoreError):
    """A run specification is invalid (unknown algorithm, parameter, or value)."""


class RunNotFound(FedcoreError):
    """No run with the given id exists in the store."""


class Cancelled(Exception):
    """Raised inside a run when the user asked it to stop (Ctrl-C, SIGTERM, job cancel)."""
