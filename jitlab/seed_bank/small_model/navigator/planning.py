"""navigator planner: a directive toward the mission's target from the egocentric view (scan when not in view)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.protocol import Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.egocentric._COLOURS
_COLOURS = "red|green|blue|purple|yellow|grey"


# library: jitlab.modules.egocentric._TYPES
_TYPES = "ball|box|key|door"


# library: jitlab.modules.egocentric._SEEN
_SEEN = re.compile(rf"(?:an?|the)\s+((?:(?:open|closed|locked)\s+)?(?:{_COLOURS})?\s*(?:{_TYPES}|goal|lava))\s+"
                   r"((?:\d+ steps? (?:ahead|to the (?:left|right))(?: and )?)+|here)", re.IGNORECASE)


# library: jitlab.modules.egocentric._OFFSET
_OFFSET = re.compile(r"(\d+) steps? (ahead|to the left|to the right)")


# library: jitlab.modules.egocentric.parse_view
def parse_view(text: str) -> dict:
    """{mission, objects: [(description, ahead, side)], front, free, carrying} from one observation
    (side < 0: left); missing parts are empty."""
    text = str(text)
    mission = re.search(r"mission:\s*(.+?)\.?\s*$", text, re.IGNORECASE | re.MULTILINE)
    seen_line = re.search(r"you see:\s*(.+)$", text, re.IGNORECASE | re.MULTILINE)
    objects = []
    for m in _SEEN.finditer(seen_line.group(1) if seen_line else ""):
        ahead = side = 0
        for n, where in _OFFSET.findall(m.group(2)):
            if where == "ahead":
                ahead = int(n)
            else:
                side = int(n) * (-1 if where.endswith("left") else 1)
        objects.append((" ".join(m.group(1).lower().split()), ahead, side))
    front = re.search(r"directly in front of you:\s*(.+?)\.\s", text + " ", re.IGNORECASE)
    free = re.search(r"free cells straight ahead:\s*(\d+)", text, re.IGNORECASE)
    carrying = re.search(r"you are carrying:\s*(.+?)\.?\s*$", text, re.IGNORECASE | re.MULTILINE)
    return {"mission": mission.group(1).strip().lower() if mission else "", "objects": objects,
            "front": front.group(1).strip().lower() if front else "", "free": int(free.group(1)) if free else 0,
            "carrying": "" if not carrying or carrying.group(1).lower() == "nothing" else carrying.group(1).lower()}


# library: jitlab.modules.egocentric._OBJ
_OBJ = re.compile(rf"\b(?:the|a|an)?\s*(?:({_COLOURS})\s+)?({_TYPES})\b", re.IGNORECASE)


# library: jitlab.modules.egocentric.mission_target
def mission_target(mission: str, carrying: str = "") -> tuple[str, str, str]:
    """(colour or "", type, what to do when it is in front: pick up | toggle | drop | reach) for a mission."""
    named = _OBJ.findall(mission)
    if not named:
        return "", "", "reach"
    mission = mission.lower()
    if mission.startswith("put") and len(named) >= 2:
        first, second = named[0], named[1]
        held = carrying and first[1].lower() in carrying and (not first[0] or first[0].lower() in carrying)
        colour, kind = (second if held else first)
        return colour.lower(), kind.lower(), "drop" if held else "pick up"
    colour, kind = named[0]
    verb = "pick up" if mission.startswith("pick up") else "toggle" if re.match(r"(open|unlock)\b", mission) \
        else "reach"
    return colour.lower(), kind.lower(), verb


# library: jitlab.modules.egocentric._matches
def _matches(description: str, colour: str, kind: str) -> bool:
    return kind in description.split() and (not colour or colour in description.split())


# library: jitlab.modules.egocentric.locked_key
def locked_key(view: dict) -> str | None:
    """The colour of the key the mission needs first ("" any colour) when it is to open a door that the view
    shows locked and no key is carried; None otherwise."""
    colour, kind, verb = mission_target(view["mission"], view["carrying"])
    locked = [d for d, _, _ in view["objects"] if _matches(d, colour, kind) and d.startswith("locked")]
    if verb != "toggle" or not locked or "key" in view["carrying"]:
        return None
    return next((c for c in locked[0].split() if c in _COLOURS.split("|")), "")


# library: jitlab.modules.egocentric.directive
def directive(view: dict, turns: int = 0, key: str | None = None) -> tuple[str, str]:
    """(the command to do next, why) for a parsed view; ``turns``: turns in place since the last step forward;
    ``key``: the colour of a key to fetch first (a locked door seen, see ``locked_key``), None for none."""
    colour, kind, verb = mission_target(view["mission"], view["carrying"])
    if not kind:
        return "go forward" if view["free"] else "turn left", "no target named: explore"
    if key is not None and "key" not in view["carrying"]:
        colour, kind, verb = key, "key", "pick up"
    name = f"the {colour + ' ' if colour else ''}{kind}"
    visible = [(abs(a) + abs(s), a, s) for d, a, s in view["objects"] if _matches(d, colour, kind)]
    if not visible:
        if turns < 3:
            return "turn left", f"{name} is not in view: turn to look around"
        return ("go forward", f"{name} is not in view: walk on") if view["free"] else \
            ("turn right", f"{name} is not in view and the way ahead is blocked: turn")
    _, ahead, side = min(visible)
    where = f"{name} is {ahead} ahead and {abs(side)} to the {'left' if side < 0 else 'right'}" if side else \
        f"{name} is {ahead} ahead"
    empty_front = view["front"] == "empty floor"
    if verb == "drop" and empty_front and ((ahead == 2 and side == 0) or (ahead == 1 and abs(side) == 1)):
        return "drop", f"{where}: drop it in front of you, next to it"
    if ahead == 1 and side == 0:
        if verb == "drop":
            return "turn left", f"{where}, directly in front: turn to find a free cell next to it"
        return ("pick up" if verb == "pick up" else "toggle" if verb == "toggle" else "go forward"), \
            f"{where}, directly in front: {verb}"
    if ahead >= 1 and view["free"] >= 1 and (side != 0 or ahead > 1):
        return "go forward", f"{where}: walk forward" + (" first" if side else " to it")
    if side == 0:
        return "turn left", f"{where}, the way is blocked: go round"
    return ("turn left" if side < 0 else "turn right"), f"{where}: turn toward it"


# library: jitlab.modules.egocentric.EgocentricPlanner
@dataclass
class EgocentricPlanner:
    """P: a directive toward the mission's target from the current view (see the module docstring)."""
    bonus: float = field(default=2.0, metadata={"help": "added to the score of the directed command (0: the "
                                                        "directive is text only)", "min": 0.0})

    def reset(self, ctx: Ctx) -> None:
        self.turns, self._seen, self.key = 0, 0, None

    def plan(self, view: View, ctx: Ctx) -> Directive:
        last = next((e for e in reversed(view.events) if e.kind in ("observation", "tool_result")), None)
        for event in view.events[self._seen:]:
            if event.kind == "action":
                self.turns = self.turns + 1 if event.content.startswith("turn") else 0
        self._seen = len(view.events)
        if last is None:
            return Directive("")
        seen = parse_view(last.content)
        found = locked_key(seen)
        self.key = found if found is not None else None if "key" in seen["carrying"] else self.key
        command, why = directive(seen, self.turns, self.key)
        return Directive(f"Directive: {command} ({why}).", {"prior": {command: self.bonus} if self.bonus else {},
                                                             "directed": command})


# ---- the harness's own code ----

@dataclass
class Planner(EgocentricPlanner):
    bonus: float = field(default=8.0, metadata={"help": "added to the directed command's score (dev traces: at 2.0 and 4.0 "
                                                        "the model walked past a 'drop' directive)"})
