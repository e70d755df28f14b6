"""jitlab's exception hierarchy. Each error says what is wrong and what to do."""
from __future__ import annotations

__all__ = ["JitlabError", "ConfigError", "UnknownName", "HarnessError", "InfraError",
           "BudgetExceeded", "ConfigDrift", "ModelPackageMissing", "RunLocked", "StorageError"]


class JitlabError(Exception):
    """Base of every jitlab error."""

    def __reduce__(self):
        # pickle (Ray, process pools) restores the message and fields without calling __init__, whose arguments
        # differ per subclass (Exception's default would call cls(*args) with the formatted message)
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls, args, state):
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class ConfigError(JitlabError):
    """Bad user input (flags, files, parameters)."""


class UnknownName(ConfigError):
    """A suite/harness/backbone/split name that does not exist; lists what does."""
    def __init__(self, kind: str, name: str, available):
        self.kind, self.name, self.available = kind, name, sorted(available)
        super().__init__(f"unknown {kind} {name!r}; available: {', '.join(self.available) or '(none)'}")


class HarnessError(JitlabError):
    """A harness folder or harness code is broken. ``file`` names the culprit."""
    def __init__(self, message: str, file: str | None = None, kind: str = "interface_mismatch"):
        self.file, self.kind = file, kind
        super().__init__(f"{file}: {message}" if file else message)


class InfraError(JitlabError):
    """Infrastructure failure (provider down, sandbox set-up failed): retried, never a task failure."""


class BudgetExceeded(JitlabError):
    """An episode ran out of steps, tokens or wall time."""


class ConfigDrift(ConfigError):
    """A resumed run was started with a different config."""


class ModelPackageMissing(ConfigError):
    """The embedded model package is not installed."""


class RunLocked(ConfigError):
    """Another process is writing this run directory (or bank): one writer at a time."""


class StorageError(ConfigError):
    """A record file cannot be read or written (corrupt, disk full, not writable): the user's to fix, never
    the harness's failure. The message names the file and what to do."""
