"""Errors that carry a message meant for a person, not a traceback."""


class FedcoreError(Exception):
    """Base class: the message is shown to the user as it is."""


class DataError(FedcoreError):
    """The data cannot be turned into a usable federation (names the site / column / row)."""


class SpecError(FedcoreError):
    """A run specification is invalid (unknown algorithm, parameter, or value)."""


class RunNotFound(FedcoreError):
    """No run with the given id exists in the store."""


class Cancelled(BaseException):
    """Raised inside a run when the user asked it to stop (Ctrl-C, SIGTERM, job cancel).

    Like KeyboardInterrupt it is not an Exception, so no `except Exception` can swallow it."""


def cancel_on_sigterm() -> None:
    """Make SIGTERM (a cancel from the dashboard, or `kill`) stop a run the way Ctrl-C does."""
    import signal

    def _raise(signum: int, frame: object) -> None:
        raise Cancelled("terminated")

    signal.signal(signal.SIGTERM, _raise)


class TrainingError(FedcoreError):
    """The run itself failed (e.g. its loss became infinite or NaN): the message says when and where.
    Not bad input: the command line exits 1, as for any failed run."""
