"""The pipe protocol between the trusted parent and the sandboxed child.

One message per line: a JSON object, UTF-8, that carries the run's ``nonce`` and an ``op``.
The child talks only on its dedicated RPC descriptor; its stdout and stderr go to a separate,
size-capped pipe that the parent never parses, so ``print`` cannot forge a message.

parent -> child:  start, begin, decide, observe, reply, close
child -> parent:  hello (set-up done, harness not yet touched), progress (importing a file),
                  ready, chat, score, done, fail

The parent accepts only exact shapes (:func:`check`): exact key sets, exact JSON types (a
``bool`` is not an ``int``), no duplicate keys, no NaN/Infinity, a size cap per line. Anything
else is a :class:`WireError` and becomes ``protocol_error``. The nonce does not stop a hostile
harness, which can read its own process memory; it stops noise and stale streams from being
taken for messages. What keeps results honest is that the parent trusts nothing but typed
decisions and backbone requests: it steps the environment and scores it itself.
"""
from __future__ import annotations

import json
import math

from jitlab.envs.base import TaskSpec
from jitlab.protocol import Capability, Completion, Decision, Observation

__all__ = ["WireError", "encode", "decode", "check", "task_to_wire", "task_from_wire", "obs_to_wire",
           "obs_from_wire", "decision_to_wire", "decision_from_wire", "completion_to_wire",
           "completion_from_wire", "json_safe"]


class WireError(ValueError):
    """A message that is not well-formed JSON of the exact expected shape."""


def encode(message: dict) -> bytes:
    """One line of JSON (strict: raises TypeError/ValueError on values JSON cannot carry)."""
    return (json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode()


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise WireError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _no_constants(name):
    raise WireError(f"non-standard JSON constant {name}")


def decode(line: bytes, nonce: str) -> dict:
    """Parse one line; check it is an object with the right nonce and a string ``op``."""
    try:
        message = json.loads(line.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise WireError(f"not valid JSON: {exc.__class__.__name__}: {str(exc)[:200]}") from None
    if type(message) is not dict:
        raise WireError(f"a message must be a JSON object, got {type(message).__name__}")
    if message.get("nonce") != nonce:
        raise WireError("wrong or missing nonce")
    if type(message.get("op")) is not str:
        raise WireError("missing op")
    return message


# --- exact type checks --------------------------------------------------------------------------

def _is_json(value, depth: int = 0) -> bool:
    if depth > 64:
        return False
    kind = type(value)
    if value is None or kind in (str, bool, int):
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(_is_json(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _is_json(v, depth + 1) for k, v in value.items())
    return False


def _str(v):
    return type(v) is str


def _int(v):
    return type(v) is int


def _opt_str(v):
    return v is None or type(v) is str


def _opt_int(v):
    return v is None or type(v) is int


def _messages(v):
    return (type(v) is list and len(v) > 0 and
            all(type(m) is dict and set(m) == {"role", "content"} and _str(m["role"]) and _str(m["content"])
                for m in v))


def _str_list(v):
    return type(v) is list and all(_str(s) for s in v)


def _params(v):
    return type(v) is dict and all(_str(k) and (_is_json(x) and (type(x) is not dict)) for k, x in v.items())


def _decision(v):
    return (type(v) is dict and set(v) == {"tool", "args", "thought", "data"} and _str(v["tool"])
            and type(v["args"]) is dict and _is_json(v["args"]) and _str(v["thought"])
            and type(v["data"]) is dict and _is_json(v["data"]))


def _diagnostic(v):
    return (type(v) is dict and set(v) == {"kind", "message", "file", "line", "traceback"}
            and _str(v["kind"]) and _str(v["message"]) and _opt_str(v["file"]) and _opt_int(v["line"])
            and _str(v["traceback"]))


# op -> {field: check}; "nonce" and "op" are implied
_CHILD_OPS = {
    "hello": {},
    "progress": {"file": _str},
    "ready": {"name": _str, "sha": _str},
    "chat": {"id": _int, "messages": _messages, "params": _params},
    "score": {"id": _int, "messages": _messages, "candidates": _str_list},
    "done": {"result": lambda v: v is None or _decision(v)},
    "fail": {"diagnostic": _diagnostic},
}


def check(message: dict, allowed_ops: tuple[str, ...]) -> dict:
    """Check a decoded child message against the exact shape of its op."""
    op = message["op"]
    if op not in allowed_ops:
        raise WireError(f"op {op!r} not allowed here (expected {' | '.join(allowed_ops)})")
    fields = _CHILD_OPS[op]
    extra = set(message) - set(fields) - {"nonce", "op"}
    missing = set(fields) - set(message)
    if extra or missing:
        raise WireError(f"{op}: unexpected keys {sorted(extra)} / missing keys {sorted(missing)}")
    for name, ok in fields.items():
        if not ok(message[name]):
            raise WireError(f"{op}: field {name!r} has the wrong type or shape")
    return message


# --- conversions ---------------------------------------------------------------------------------

def json_safe(value, depth: int = 0):
    """A JSON-able copy of ``value``: unknown objects become their repr (for records, never for decisions)."""
    if depth > 32:
        return repr(value)[:200]
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    return repr(value)[:2000]


def task_to_wire(spec) -> dict:
    return spec.public()


def task_from_wire(data: dict) -> TaskSpec:
    """Rebuild the public TaskSpec child-side; ``data`` (answers, env internals) stays empty."""
    tools = [Capability(t["name"], t["description"], t.get("args", {})) for t in data.get("tools", [])]
    return TaskSpec(id=data["id"], suite=data["suite"], family=data["family"], split=data["split"],
                    description=data["description"], tools=tools, max_steps=data["max_steps"], data={})


def obs_to_wire(obs: Observation) -> dict:
    return {"text": str(obs.text), "candidates": [str(c) for c in obs.candidates], "done": bool(obs.done),
            "reward": float(obs.reward), "info": json_safe(obs.info)}


def obs_from_wire(data: dict) -> Observation:
    return Observation(text=data["text"], candidates=list(data["candidates"]), done=data["done"],
                       reward=data["reward"], info=dict(data["info"]))


def decision_to_wire(decision: Decision) -> dict:
    """Child side, strict: tool/thought must be str and args JSON; ``data`` (the record) is made safe."""
    if not isinstance(decision, Decision):
        raise TypeError(f"expected a Decision, got {type(decision).__name__}")
    if not isinstance(decision.tool, str) or not isinstance(decision.thought, str):
        raise TypeError(f"Decision.tool and Decision.thought must be str, got {type(decision.tool).__name__} "
                        f"and {type(decision.thought).__name__}")
    if not isinstance(decision.args, dict):
        raise TypeError(f"Decision.args must be a dict, got {type(decision.args).__name__}")
    args = json.loads(json.dumps(decision.args, allow_nan=False))  # TypeError/ValueError on non-JSON values
    return {"tool": str(decision.tool), "args": args, "thought": str(decision.thought),
            "data": json_safe(decision.data if isinstance(decision.data, dict) else {})}


def decision_from_wire(data: dict) -> Decision:
    """Parent side; ``data`` has passed :func:`check` (exact types)."""
    return Decision(tool=data["tool"], args=data["args"], thought=data["thought"], data=data["data"])


def completion_to_wire(c: Completion) -> dict:
    return {"text": str(c.text), "prompt_tokens": int(c.prompt_tokens), "completion_tokens": int(c.completion_tokens),
            "cost": float(c.cost), "latency_s": float(c.latency_s), "cached": bool(c.cached)}


def completion_from_wire(data: dict) -> Completion:
    return Completion(**data)
