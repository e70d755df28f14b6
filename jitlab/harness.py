"""Load a harness from a folder in the seed-bank format.

A harness folder holds ``memory.py`` (class ``Memory``), ``planning.py`` (class ``Planner``),
``tool_policy.py`` (class ``CapabilityPolicy``), ``action.py`` (class ``Action``), ``prompt.yaml``
(prompt texts and templates, a mapping) and ``description.yaml`` (name, lineage, purpose,
modules). An optional ``hooks.py`` (class ``Hooks``) holds lifecycle hooks added by an engineer.
Each class is built with no arguments; configuration lives in class attributes.

The trusted parent reads an untrusted folder before sandboxing it (identity, resume), so ``read_files``
reads at most ``MAX_FILE_BYTES`` per file and ``MAX_FOLDER_BYTES`` in all and refuses a larger folder by name.

``resolve(name_or_path)`` finds a seed by short name in ``seed_bank/`` (a case study as
``case_studies/<name>``) or takes a folder path.

Seeds: ``seed_bank/`` (a link to ``jitlab/seed_bank/``, shipped as package data) holds each seed's
*resolved* source, generated from its library composition in ``jitlab/seeds/`` (see :mod:`jitlab.resolve`).
The paper's case-study harnesses live one level down, in ``seeds/case_studies/`` and
``seed_bank/case_studies/``: regenerated and checked like the seeds, but not seeds (``seed_names()``, the
bank B0, baselines and Table 2 leave them out); ``case_study_names()`` lists them. ``small_model/<name>``
(``small_model_names()``) is a family of the same kind: fixed compositions of the mechanisms a small backbone can
use (``jitlab/modules/likelihood.py`` and its neighbours), run as ``--harness small_model/<name>``.

Identity: ``harness_sha`` hashes the resolved files, so a folder that subclasses library modules and its
resolved form have the same sha, and a change to library code a harness uses changes its sha.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from jitlab import safe_yaml
from jitlab.errors import HarnessError, UnknownName
from jitlab.paths import package_root
from jitlab.protocol import SLOTS

__all__ = ["CASE_STUDIES", "MODULE_FILES", "SMALL_MODEL", "Harness", "case_study_names", "describe_files", "harness_sha",
           "load_harness", "read_files", "regenerate_seeds", "resolve",
           "resolve_folder", "seed_names", "seed_sources_dir", "small_model_names"]

# file -> (class it must define, methods that class must have), from the slot table (jitlab.protocol.SLOTS)
MODULE_FILES = {s.file: (s.cls, s.required) for s in SLOTS.values() if not s.optional}
YAML_FILES = ("prompt.yaml", "description.yaml")
OPTIONAL_FILES = {s.file: (s.cls, s.required) for s in SLOTS.values() if s.optional}
HARNESS_FILES = tuple(MODULE_FILES) + YAML_FILES
# what the parent reads of a harness folder: the largest seed file is 22 KB and the largest seed 37 KB, so these
# leave generated harnesses ample room while a 1 GiB (sparse) description.yaml is refused, not read into memory
MAX_FILE_BYTES = 1 << 20
MAX_FOLDER_BYTES = 4 << 20


def seed_bank_dir() -> Path:
    """The resolved seeds: ``jitlab/seed_bank/`` (``seed_bank/`` in a checkout links to it)."""
    return package_root() / "seed_bank"


def seed_names() -> list[str]:
    """The seeds (B0): folders of ``seed_bank/`` with a description.yaml (``case_studies/`` has none)."""
    root = seed_bank_dir()
    return sorted(p.name for p in root.iterdir() if (p / "description.yaml").exists()) if root.exists() else []


CASE_STUDIES = "case_studies"


SMALL_MODEL = "small_model"


def _family(family: str, root: Path | None) -> list[str]:
    folder = (root or seed_bank_dir()) / family
    return sorted(f"{family}/{p.name}" for p in folder.iterdir() if (p / "description.yaml").is_file()) \
        if folder.is_dir() else []


def case_study_names(root: Path | None = None) -> list[str]:
    """The paper's case-study harnesses as ``case_studies/<name>`` (in ``root``, default ``seed_bank/``)."""
    return _family(CASE_STUDIES, root)


def small_model_names(root: Path | None = None) -> list[str]:
    """The small-model mechanism harnesses as ``small_model/<name>`` (in ``root``, default ``seed_bank/``)."""
    return _family(SMALL_MODEL, root)


def resolve(name_or_path: str | Path) -> Path:
    """A seed name (``react``), a case study (``case_studies/turnstile``) or a path to a harness folder -> the folder."""
    path = Path(name_or_path)
    if path.is_dir():
        return path.resolve()
    candidate = seed_bank_dir() / str(name_or_path)
    if candidate.is_dir():
        return candidate
    raise UnknownName("harness", str(name_or_path), seed_names() + case_study_names() + small_model_names()
                      + ["<path to a harness folder>"])


def read_files(folder: str | Path) -> dict[str, str]:
    """The harness's files as {name: text}; raises HarnessError naming the missing files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise HarnessError(f"harness folder {folder} does not exist", file=str(folder), kind="import_error")
    inside = folder.resolve()
    for name in (*HARNESS_FILES, *OPTIONAL_FILES):  # a link out would show the parent a file the sandbox cannot see
        if (folder / name).is_symlink() and inside not in (folder / name).resolve().parents:
            raise HarnessError(f"{folder / name} is a symbolic link to {(folder / name).resolve()}, outside the harness "
                               "folder; copy the file into the folder instead", file=name, kind="import_error")
    missing = [f for f in HARNESS_FILES if not (folder / f).is_file()]
    if missing:
        raise HarnessError(f"harness folder {folder} is missing {', '.join(missing)} "
                           f"(a harness needs {', '.join(HARNESS_FILES)})", file=missing[0], kind="import_error")
    odd = [f for f in OPTIONAL_FILES if (folder / f).exists() and not (folder / f).is_file()]
    if odd:  # an optional file that is a folder (or a FIFO) is a mistake, not "no hooks"
        raise HarnessError(f"{folder / odd[0]} is {'a directory' if (folder / odd[0]).is_dir() else 'not a regular file'}"
                           f", not a file; {odd[0]} is optional: make it a file, or move it away", file=odd[0],
                           kind="import_error")
    names = list(HARNESS_FILES) + [f for f in OPTIONAL_FILES if (folder / f).is_file()]
    sizes = {name: (folder / name).stat().st_size for name in names}
    for name, size in sizes.items():
        if size > MAX_FILE_BYTES:
            raise HarnessError(f"{size} bytes in harness folder {folder}, over the {MAX_FILE_BYTES}-byte limit on one "
                               "harness file; a harness file is code or a short YAML: shrink it", file=name,
                               kind="import_error")
    if sum(sizes.values()) > MAX_FOLDER_BYTES:
        raise HarnessError(f"harness folder {folder} holds {sum(sizes.values())} bytes in its harness files, over the "
                           f"{MAX_FOLDER_BYTES}-byte limit on a harness; shrink its files", file=max(sizes, key=sizes.get),
                           kind="import_error")
    return {name: _read_capped(folder / name) for name in names}


def _read_capped(path: Path) -> str:
    """A harness file's text, reading no more than ``MAX_FILE_BYTES`` bytes (it may have grown since it was
    measured); HarnessError naming the file and the byte when it is not UTF-8."""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise HarnessError(f"{path} grew past the {MAX_FILE_BYTES}-byte limit on one harness file while it was read",
                           file=path.name, kind="import_error")
    try:
        # universal newlines, as Path.read_text gives them
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                           "save it as UTF-8", file=path.name, kind="import_error") from None


def harness_sha(files: dict[str, str], sources: dict | None = None) -> str:
    """sha256 over the sorted file names and contents of the *resolved* files: a harness's identity.

    A folder that does not resolve (a syntax error, say) is hashed as it is; it cannot run anyway.
    ``sources`` replaces library module sources (see :func:`jitlab.resolve.resolve_files`)."""
    from jitlab.resolve import ResolveError, resolve_files
    try:
        files = resolve_files(files, sources)
    except ResolveError:
        pass
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()


@dataclass
class Harness:
    """A loaded harness: module classes, prompts and description. ``build()`` makes fresh instances."""
    name: str
    folder: Path
    sha: str
    classes: dict[str, type]
    prompts: dict
    description: dict
    files: dict[str, str] = field(repr=False, default_factory=dict)

    @classmethod
    def from_modules(cls, memory: type, planner: type, policy: type, action: type, hooks: type | None = None,
                     name: str = "from_modules", prompts: dict | None = None, description: dict | None = None) -> Harness:
        """A harness from module classes (one per slot of jitlab.protocol.SLOTS) instead of a folder, for notebooks
        and examples. Each class is checked for the methods its slot needs, as a folder's are; ``build()`` makes fresh
        instances per episode. Its code runs in this process (there is no folder to sandbox); its ``sha`` hashes the
        classes' names and source where it can be read."""
        given = {"memory": memory, "planner": planner, "policy": policy, "action": action, "hooks": hooks}
        classes, digest = {}, hashlib.sha256()
        for slot in SLOTS.values():
            value = given[slot.key]
            if value is None and slot.optional:
                continue
            if not isinstance(value, type):
                raise HarnessError(f"{slot.key}= must be a class (build() makes a fresh instance per episode), got "
                                   f"{type(value).__name__}; pass the class, not an instance", file=slot.file,
                                   kind="interface_mismatch")
            absent = [m for m in slot.required if not callable(getattr(value, m, None))]
            if absent:
                raise HarnessError(f"class {value.__name__} given as {slot.key}= lacks method(s) {', '.join(absent)}",
                                   file=slot.file, kind="interface_mismatch")
            classes[slot.key] = value
            try:
                source = inspect.getsource(value)
            except (OSError, TypeError):  # defined where no source is kept (a REPL): its name stands for it
                source = ""
            digest.update(f"{slot.key}\0{value.__module__}.{value.__qualname__}\0{source}\0".encode())
        return cls(name=name, folder=Path("."), sha=digest.hexdigest(), classes=classes, prompts=dict(prompts or {}),
                   description=dict(description or {"name": name}))

    def build(self) -> dict[str, object]:
        """Fresh module instances keyed memory/planner/policy/action (+ hooks)."""
        instances = {}
        for key, cls in self.classes.items():
            try:
                instances[key] = cls()
            except Exception as exc:
                raise HarnessError(f"{cls.__name__}() failed: {exc!r}", file=_FILE_OF[key], kind="runtime_error") from exc
        return instances


_KEY = {s.file: s.key for s in SLOTS.values()}
_FILE_OF = {v: k for k, v in _KEY.items()}


def _load_yaml(files: dict[str, str], name: str) -> dict:
    """A harness YAML file as a mapping, aliases refused (jitlab/safe_yaml.py); HarnessError naming the file."""
    try:
        data = safe_yaml.load(files[name]) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise HarnessError(f"invalid YAML{where}: {getattr(exc, 'problem', None) or exc}", file=name,
                           kind="parse_error") from exc
    if not isinstance(data, dict):
        raise HarnessError(f"must be a mapping, got {type(data).__name__}", file=name, kind="parse_error")
    return data


def describe_files(files: dict[str, str]) -> dict:
    """description.yaml of a file set as a dict ({} when absent, not YAML, using an alias or not a mapping)."""
    try:
        return _load_yaml({"description.yaml": "", **files}, "description.yaml")
    except HarnessError:
        return {}


_LOAD_LOCK = threading.Lock()


def load_harness(name_or_path: str | Path) -> Harness:
    """Import a harness folder and check each file defines its class with the required methods."""
    with _LOAD_LOCK:  # another thread would see a module in sys.modules before its code has run
        return _load(resolve(name_or_path))


def _load(folder: Path) -> Harness:
    files = read_files(folder)
    sha = harness_sha(files)
    # keyed by the folder and its files as written: a library-composed folder and its resolved form share
    # a sha but are different modules
    raw = hashlib.sha256(str(folder).encode() + b"\0" + "\0".join(f"{k}\0{v}" for k, v in sorted(files.items())).encode())
    package = f"_jitlab_harness_{raw.hexdigest()[:16]}"
    if package not in sys.modules:
        pkg = types.ModuleType(package)
        pkg.__path__ = [str(folder)]
        sys.modules[package] = pkg
    classes = {}
    for file, (cls_name, methods) in {**MODULE_FILES, **{k: v for k, v in OPTIONAL_FILES.items() if k in files}}.items():
        module = _import(package, folder, file)
        cls = getattr(module, cls_name, None)
        if not isinstance(cls, type):
            raise HarnessError(f"must define a class named {cls_name}", file=file, kind="interface_mismatch")
        absent = [m for m in methods if not callable(getattr(cls, m, None))]
        if absent:
            raise HarnessError(f"class {cls_name} lacks method(s) {', '.join(absent)}", file=file,
                               kind="interface_mismatch")
        classes[_KEY[file]] = cls
    description = _load_yaml(files, "description.yaml")
    return Harness(name=str(description.get("name", folder.name)), folder=folder, sha=sha, classes=classes,
                   prompts=_load_yaml(files, "prompt.yaml"), description=description, files=files)


def _import(package: str, folder: Path, file: str) -> types.ModuleType:
    name = f"{package}.{file[:-3]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise HarnessError(f"syntax error line {exc.lineno}: {exc.msg}", file=file, kind="parse_error") from exc
    except Exception as exc:
        del sys.modules[name]
        raise HarnessError(f"import failed: {exc!r}", file=file, kind="import_error") from exc
    return module


def resolve_folder(folder: str | Path, sources: dict | None = None) -> dict[str, str]:
    """Read a harness folder (a seed name or a path) and return its resolved files."""
    from jitlab.resolve import resolve_files
    return resolve_files(read_files(resolve(folder)), sources)


# ------------------------------------------------------------------------------------------------------ seeds

def seed_sources_dir() -> Path:
    """``jitlab/seeds/``: each seed as composed from the module library (the source of ``seed_bank/``)."""
    return Path(__file__).parent / "seeds"


def regenerate_seeds(check: bool = False, out_dir: str | Path | None = None, sources: dict | None = None,
                     names: list[str] | None = None) -> list[str]:
    """Write the resolved form of every ``jitlab/seeds/<name>/`` into ``seed_bank/<name>/`` (or ``out_dir``),
    the case studies (``case_studies/<name>``) and the small-model harnesses (``small_model/<name>``) included.

    Returns the names whose written folder differed (with ``check=True`` nothing is written: the names
    whose checked-in folder is out of date, or missing)."""
    from jitlab.resolve import resolve_files
    src_root, dest_root = seed_sources_dir(), Path(out_dir) if out_dir else seed_bank_dir()
    stale = []
    every = sorted(p.name for p in src_root.iterdir() if (p / "description.yaml").is_file()) + \
        case_study_names(src_root) + small_model_names(src_root)
    for name in names or every:
        files = resolve_files(read_files(src_root / name), sources)
        dest = dest_root / name
        current = {}
        if dest.is_dir():
            current = {p.name: p.read_text() for p in sorted(dest.iterdir())
                       if p.name in HARNESS_FILES or p.name in OPTIONAL_FILES}
        if current != files:
            stale.append(name)
            if not check:
                dest.mkdir(parents=True, exist_ok=True)
                for extra in set(current) - set(files):
                    (dest / extra).unlink()
                for file, text in files.items():
                    (dest / file).write_text(text)
    return stale
