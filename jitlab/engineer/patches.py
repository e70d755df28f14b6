"""Patches: a ``hooks.py`` overlay (class ``Hooks`` with up to the four lifecycle hooks) on any harness.

    from jitlab.engineer.patches import apply_patch, check_patch, patch_identity, validate_patch
    problem = check_patch(text)                       # None, or a typed diagnostic dict (static checks)
    folder = apply_patch("react", text, "work/p1")    # the base harness's files + the patch as hooks.py
    sha = patch_identity("react", text)               # harness_sha of base + patch: one identity for both
    v = validate_patch("react", text, suite, dev_task, llm, workdir)   # static checks, then the sandbox

The base harness is never edited: ``apply_patch`` copies its files into a new folder and adds the patch as
``hooks.py`` (the runtime already calls ``on_init / pre_decision / pre_action / post_feedback`` of every
module, hooks included). A patched folder is not a seed, so it runs in the sandbox like any untrusted code:
the parent brokers backbone and environment calls and the scorer never enters the child.

Static checks (``check_patch``), each failure a typed diagnostic (jitlab.sandbox.diagnostics kinds):
compiles (parse_error); imports only the standard library, ``jitlab.protocol``, ``jitlab.harnesskit`` and
``jitlab.modules`` (import_error: suite code, the scorer and the rest of jitlab are not a patch's to read);
defines ``class Hooks`` whose public methods are only the four hooks, with their signatures
(interface_mismatch). Then ``validate_patch`` runs jitlab.jit.repair's validation of the patched folder
(compile, import, interface and one smoke episode in the sandbox).

Caveat: a base harness that already has a ``hooks.py`` is refused (ConfigError): patch the harness it was
built from with one patch holding every hook (the engineer's later rounds propose whole hooks files).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.harness import harness_sha, read_files, resolve
from jitlab.jit.repair import RepairConfig, Validation, validate_files
from jitlab.protocol import HOOKS

__all__ = ["HOOK_PARAMS", "NOOP_PATCH", "apply_patch", "check_patch", "patch_files", "patch_identity",
           "validate_patch"]

# each hook's parameters after self
HOOK_PARAMS = {"on_init": ("ctx", "obs"), "pre_decision": ("ctx", "context"),
               "pre_action": ("ctx", "context", "decision"), "post_feedback": ("ctx", "decision", "obs")}
assert tuple(HOOK_PARAMS) == HOOKS

_ALLOWED_JITLAB = ("jitlab.protocol", "jitlab.harnesskit", "jitlab.modules")

NOOP_PATCH = '''"""No-op patch (a control): every hook present, none changes anything."""


class Hooks:
    def on_init(self, ctx, obs):
        pass

    def pre_decision(self, ctx, context):
        return []

    def pre_action(self, ctx, context, decision):
        return None

    def post_feedback(self, ctx, decision, obs):
        pass
'''


def _diag(kind: str, message: str, line: int | None = None) -> dict:
    return {"kind": kind, "message": message, "file": "hooks.py", "line": line, "traceback": "", "phase": "check"}


def _import_allowed(name: str) -> bool:
    top = name.split(".")[0]
    if top == "jitlab":
        return any(name == a or name.startswith(a + ".") for a in _ALLOWED_JITLAB)
    return top in sys.stdlib_module_names


def check_patch(text: str) -> dict | None:
    """None when ``text`` is a well-formed patch, else one typed diagnostic (a dict, as Diagnostic.as_dict)."""
    try:
        tree = ast.parse(text, "hooks.py")
    except (SyntaxError, ValueError) as exc:
        return _diag("parse_error", f"the patch does not compile: {exc}", getattr(exc, "lineno", None))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        bad = [n for n in names if n.startswith(".") or not _import_allowed(n)]
        if bad:
            return _diag("import_error", f"the patch imports {bad[0]}; a patch may import only the standard library, "
                                         + ", ".join(_ALLOWED_JITLAB), node.lineno)
    hooks = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Hooks"]
    if not hooks:
        return _diag("interface_mismatch", "the patch must define a top-level class Hooks")
    for node in hooks[0].body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
            continue
        if node.name not in HOOK_PARAMS:
            return _diag("interface_mismatch", f"Hooks.{node.name} is not a hook; a patch implements only "
                                               f"{', '.join(HOOKS)} (helpers start with _)", node.lineno)
        params = tuple(a.arg for a in node.args.posonlyargs + node.args.args)[1:]
        if isinstance(node, ast.AsyncFunctionDef) or len(params) != len(HOOK_PARAMS[node.name]) or \
                node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
            want = ", ".join(("self",) + HOOK_PARAMS[node.name])
            return _diag("interface_mismatch", f"Hooks.{node.name} must be `def {node.name}({want})`", node.lineno)
    return None


def patch_files(base: str | Path, text: str) -> dict[str, str]:
    """The patched harness's files: the base's files plus ``hooks.py`` = ``text``."""
    files = read_files(resolve(base))
    if "hooks.py" in files:
        raise ConfigError(f"harness {base} already has a hooks.py; apply the patch to the harness it was built "
                          "from, with one patch holding every hook")
    return {**files, "hooks.py": text}


def patch_identity(base: str | Path, text: str) -> str:
    """One identity for a patch and its base harness: harness_sha of the patched (resolved) files."""
    return harness_sha(patch_files(base, text))


def apply_patch(base: str | Path, text: str, out: str | Path) -> Path:
    """Write the patched harness (base files + hooks.py) to ``out``; the base folder is not touched."""
    files = patch_files(base, text)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (out / name).write_text(body)
    return out


def validate_patch(base: str | Path, text: str, suite, dev_task, llm, workdir: str | Path, config=None):
    """Static checks, then jitlab.jit.repair's sandboxed validation of the patched folder (compile, import,
    interface, smoke episode). Returns a jitlab.jit.repair.Validation (``ok``, ``diagnostic``)."""
    problem = check_patch(text)
    files = patch_files(base, text)
    if problem is not None:
        return Validation(False, "check", harness_sha(files), problem, 0.0)
    return validate_files(files, dev_task, suite, llm, config or RepairConfig(), workdir)
