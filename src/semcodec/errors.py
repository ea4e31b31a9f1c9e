"""Exception types shared by every layer, so the CLI can map them to exit codes."""


class SemcodecError(Exception):
    """Base class: a processing error that the CLI reports in one line (exit code 1)."""


class CorruptData(SemcodecError, ValueError):
    """A .sem file or one of its layers is malformed, damaged or truncated."""


class UnsupportedInput(SemcodecError, ValueError):
    """An input image cannot be encoded (unknown format, bad mode, too large)."""


class ModelError(SemcodecError):
    """A model bundle is unknown, missing or does not match a file's recorded hash."""
