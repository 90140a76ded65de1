"""Errors that the CLI turns into one clear message and exit code 2 (no traceback unless --debug)."""


class DlmevalError(Exception):
    """Base class of every error dlmeval raises on purpose."""


class InputError(DlmevalError, ValueError):
    """Bad input from the user: a path, a text, a spec, a data file."""


class ModelNotFoundError(InputError):
    """A model that is not on disk (dlmeval never downloads unless asked)."""


class CheckpointError(ModelNotFoundError):
    """A checkpoint directory with a missing, unreadable or inconsistent file; the message names the file and the
    fix (:mod:`dlmeval.models.validate`)."""


class DataFormatError(InputError):
    """A malformed data file; the message names the file and the line."""


class StoreError(DlmevalError):
    """The run store cannot be opened or written (read-only file, full disk, not a dlmeval store)."""


class SandboxError(DlmevalError):
    """Generated code cannot be run with the isolation the sandbox promises (and the caller did not opt out)."""


class ParallelError(DlmevalError):
    """Ranks of one job disagree (signature, command, input files) or a collective failed or timed out
    (:mod:`dlmeval.parallel`)."""
