"""The SVG diagram of a harness's anatomy (jitlab.viz.anatomy): one box per slot M, P, F, A (and H for hooks)
with its label, library bases, config, state, backbone calls and hooks, and the flow between the slots.

    from jitlab.viz.anatomy import anatomy
    from jitlab.viz.anatomy_svg import to_svg
    svg = to_svg(anatomy("resum"))        # a string; Anatomy.save(path) and Anatomy._repr_svg_ use it

Plain string building, no drawing library; text is escaped and control characters dropped (XML 1.0). Paths are
shown relative to the checkout (or site-packages), so a saved diagram embeds no machine path.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from jitlab.harness import seed_bank_dir
from jitlab.paths import package_root, repo_root
from jitlab.protocol import HOOKS

if TYPE_CHECKING:  # the data classes only annotate here; the analysis imports this module
    from jitlab.viz.anatomy import Anatomy, BackboneCall, SlotAnatomy

__all__ = ["to_svg"]


def _shown_path(folder) -> str:
    """The folder relative to the checkout when inside it, so saved diagrams do not embed a machine path."""
    folder = Path(folder).resolve()
    if folder.is_relative_to(seed_bank_dir().resolve()):  # a seed: the path a reader of the repository knows
        return str(Path("seed_bank") / folder.relative_to(seed_bank_dir().resolve()))
    for root in (repo_root(), package_root().parent):   # a checkout, or site-packages when installed
        try:
            return str(Path(folder).resolve().relative_to(root))
        except ValueError:
            continue
    return str(folder)


_COLORS = {"M": "#3b6ea8", "P": "#d9822b", "F": "#3f8f4a", "A": "#a2478a", "H": "#6b6b6b"}
_TINT = {"M": "#eef3f9", "P": "#fcf3ea", "F": "#eef6ef", "A": "#f7eef5", "H": "#f3f3f3"}
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
_MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
_W, _BOX_W, _GAP, _X0 = 1164, 236, 40, 50


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0
_QUOTE = {'"': "&quot;"}


def _fit(text: str, chars: int) -> str:
    text = str(text)
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


def _wrap(text: str, chars: int, lines: int) -> list[str]:
    out = textwrap.wrap(text, chars)
    return out[:lines - 1] + [_fit(" ".join(out[lines - 1:]), chars)] if len(out) > lines else out


def _sym(symbol: str) -> str:
    """'v_t' -> v with a subscript t (as SVG tspans)."""
    base, _, sub = symbol.partition("_")
    return escape(base) + (f'<tspan baseline-shift="sub" font-size="75%">{escape(sub)}</tspan>' if sub else "")


class _Svg:
    def __init__(self):
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(self, x, y, s, size=11, weight="normal", fill="#222", anchor="start", family=_FONT, style="normal",
             raw=False) -> None:
        body = s if raw else escape(_CONTROL.sub("", str(s)))
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-family="{family}" font-size="{size}" font-weight="{weight}" '
                 f'font-style="{style}" fill="{fill}" text-anchor="{anchor}">{body}</text>')

    def rect(self, x, y, w, h, fill="#fff", stroke="#333", rx=6, width=1.2, dash=None) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{rx}" fill="{fill}" '
                 f'stroke="{stroke}" stroke-width="{width}"{d}/>')

    def path(self, d, stroke="#333", width=1.6, dash=None, arrow=True) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        marker = ' marker-end="url(#arrow)"' if arrow and not dash else ' marker-end="url(#arrow-grey)"' if arrow \
            else ""
        self.add(f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width}"{extra}{marker}/>')


def _box_lines(a: SlotAnatomy) -> list[tuple[str, str]]:
    """(kind, text) lines of one module box below its header."""
    chars = 34
    lines = [("label", _fit(a.label, 25)), ("class", _fit(f"{a.class_name}({', '.join(a.bases)})", chars))]
    lines += [("doc", t) for t in _wrap(a.doc, chars + 2, 3)]
    lines.append(("badge", ""))
    for call in a.backbone[:3]:
        lines.append(("call", _call_text(call, chars)))
    if len(a.backbone) > 3:
        lines.append(("more", f"+{len(a.backbone) - 3} more call sites"))
    if a.config:
        lines.append(("head", "config"))
        items = list(a.config.items())
        lines += [("mono", _fit(f"{k} = {v!r}", chars)) for k, v in items[:4]]
        if len(items) > 4:
            lines.append(("more", f"+{len(items) - 4} more"))
    lines.append(("head", "state"))
    if a.state:
        items = list(a.state.items())
        lines += [("mono", _fit(f"{k} ← {v.split(': ', 1)[1]}", chars)) for k, v in items[:4]]
        if len(items) > 4:
            lines.append(("more", f"+{len(items) - 4} more"))
    else:
        lines.append(("more", "none (stateless)"))
    if a.tools_added or a.tools_emitted:
        lines.append(("head", "tools"))
        if a.tools_added:
            lines.append(("mono", _fit("adds " + ", ".join(a.tools_added), chars)))
        if a.tools_emitted:
            lines.append(("mono", _fit("emits " + ", ".join(a.tools_emitted), chars)))
    lines.append(("head", "hooks"))
    lines.append(("mono", _fit(", ".join(a.hooks), chars)) if a.hooks else ("more", "none"))
    if a.overrides:
        lines.append(("more", _fit("* overrides " + ", ".join(a.overrides), chars)))
    return lines


_LINE_H = {"label": 20, "class": 16, "doc": 14, "badge": 26, "head": 18, "mono": 15, "more": 15, "call": 14}


def _call_text(call: BackboneCall, chars: int) -> str:
    """'act → to_decision → _nearest → score', eliding the middle of long paths."""
    path, middle = list(call.path), list(call.path[1:-1])
    text = " → ".join(path + [call.kind])
    while len(text) > chars and middle:
        middle.pop(0)
        text = " → ".join([path[0], "…", *middle, path[-1], call.kind])
    return _fit(text, chars)


def to_svg(a: Anatomy) -> str:
    """The anatomy as a standalone SVG document (text): title, backbone, the four module boxes, the flow between
    them, the lifecycle hooks band and the environment loop, top to bottom."""
    svg = _Svg()
    boxes = {s: _box_lines(a.slots[s]) for s in "MPFA"}
    box_h = 34 + max(sum(_LINE_H[k] for k, _ in lines) for lines in boxes.values()) + 10
    top = 150
    xs = {s: _X0 + i * (_BOX_W + _GAP) for i, s in enumerate("MPFA")}
    bus_y = top + box_h + 26
    hooks_y = bus_y + 34
    env_y = hooks_y + 66
    height = env_y + 48 + 24
    edges = {(e.src, e.dst): e for e in a.flow}
    ay = top + 60  # the height of the chain arrows v_t -> d_t -> C_t (and of the observation's way back into M)
    _draw_title(svg, a)
    _draw_backbone(svg, a, xs, top)
    for s in "MPFA":
        _draw_box(svg, s, a.slots[s], boxes[s], xs[s], top, box_h)
    _draw_chain(svg, edges, xs, ay)
    _draw_bus(svg, edges, xs, top, box_h, bus_y)
    _draw_hooks(svg, a, hooks_y)
    _draw_environment(svg, xs, top, box_h, env_y, ay)
    return _document(svg, a, height)


def _hook_calls_backbone(a: Anatomy) -> bool:
    return "H" in a.slots and a.slots["H"].calls_backbone


def _draw_title(svg: _Svg, a: Anatomy) -> None:
    """The harness name, the line legend, its folder and sha."""
    svg.text(_X0, 34, escape(a.name) + '<tspan font-size="13" font-weight="normal" fill="#666" dx="10">'
             'harness anatomy · derived from code</tspan>', size=20, weight="bold", raw=True)
    lx0 = _W - _X0 - 330
    svg.path(f"M{lx0:.1f},{30:.1f} h30", stroke="#333", width=1.4)
    svg.text(lx0 + 36, 34, "input read by the module", size=10, fill="#555")
    svg.path(f"M{lx0 + 170:.1f},{30:.1f} h30", stroke="#aaa", width=1.4, dash="4,3")
    svg.text(lx0 + 206, 34, "ignored or constant (per code)", size=10, fill="#999")
    svg.text(_X0, 54, _fit(f"{_shown_path(a.folder)}  ·  sha {a.sha[:12]}", 120), size=10.5, fill="#888", family=_MONO)


def _draw_backbone(svg: _Svg, a: Anatomy, xs: dict, top: float) -> None:
    """The backbone box, with an arrow from each module that calls it (labelled chat / score)."""
    callers = [s for s in "MPFA" if a.slots[s].calls_backbone]
    hook_llm = _hook_calls_backbone(a)
    bb_w, bb_x, bb_y = 400, _W / 2 - 200, 72
    live = bool(callers) or hook_llm
    svg.rect(bb_x, bb_y, bb_w, 40, fill="#fff7e0" if live else "#f4f4f4", stroke="#b08a1e" if live else "#aaa",
             rx=20, width=1.6 if live else 1, dash=None if live else "5,4")
    svg.text(_W / 2, bb_y + 18, "Backbone (frozen LLM)", size=13, weight="bold", anchor="middle",
             fill="#6b5310" if live else "#999")
    svg.text(_W / 2, bb_y + 32, "ctx.llm.chat / ctx.llm.score — brokered, counted, cached" if live
             else "never called by this harness", size=10, anchor="middle", fill="#8a7336" if live else "#999")
    for s in callers:
        cx = xs[s] + _BOX_W / 2
        tx = min(max(cx, bb_x + 30), bb_x + bb_w - 30)
        svg.add(f'<path d="M{cx:.1f},{top:.1f} C{cx:.1f},{top - 22:.1f} {tx:.1f},{bb_y + 62:.1f} '
                f'{tx:.1f},{bb_y + 42:.1f}" fill="none" stroke="#b08a1e" stroke-width="1.5" '
                f'stroke-dasharray="6,3" marker-end="url(#arrow-gold)"/>')
        kinds = " + ".join(a.slots[s].backbone_kinds)
        svg.text(cx + (8 if cx >= tx else -8), top - 10, kinds, size=10.5, fill="#8a6a12", weight="bold",
                 anchor="start" if cx >= tx else "end")


def _draw_box(svg: _Svg, s: str, sl: SlotAnatomy, lines: list, x: float, top: float, box_h: float) -> None:
    """One module's box: its header, then the lines of _box_lines."""
    svg.rect(x, top, _BOX_W, box_h, fill=_TINT[s], stroke=_COLORS[s], width=1.6, rx=8)
    svg.add(f'<path d="M{x:.1f},{top + 28:.1f} v-20 a8,8 0 0 1 8,-8 h{_BOX_W - 16:.1f} a8,8 0 0 1 8,8 v20 z" '
            f'fill="{_COLORS[s]}"/>')
    svg.text(x + 10, top + 19, f"{sl.role}", size=13, weight="bold", fill="#fff")
    svg.text(x + _BOX_W - 10, top + 19, s, size=13, weight="bold", fill="#fff", anchor="end")
    y = top + 34
    for kind, text in lines:
        h = _LINE_H[kind]
        if kind == "label":
            svg.text(x + 10, y + 15, text, size=15, weight="bold", fill=_COLORS[s])
        elif kind == "class":
            svg.text(x + 10, y + 12, text, size=10, family=_MONO, fill="#555")
        elif kind == "doc":
            svg.text(x + 10, y + 11, text, size=10, fill="#666", style="italic")
        elif kind == "badge":
            if sl.calls_backbone:
                label = "calls backbone: " + " + ".join(sl.backbone_kinds)
                svg.rect(x + 10, y + 5, 7 * len(label) * 0.92 + 14, 17, fill="#fff1c9", stroke="#b08a1e", rx=8.5,
                         width=1)
                svg.text(x + 17, y + 17.5, label, size=10, weight="bold", fill="#7a5c0c")
            else:
                svg.rect(x + 10, y + 5, 118, 17, fill="#ffffff", stroke="#bbb", rx=8.5, width=1)
                svg.text(x + 17, y + 17.5, "no backbone call", size=10, fill="#888")
        elif kind == "head":
            svg.text(x + 10, y + 13, text.upper(), size=9, weight="bold", fill=_COLORS[s])
            svg.add(f'<line x1="{x + 16 + 6.5 * len(text):.1f}" y1="{y + 10:.1f}" x2="{x + _BOX_W - 10:.1f}" '
                    f'y2="{y + 10:.1f}" stroke="{_COLORS[s]}" stroke-opacity="0.25"/>')
        elif kind == "call":
            svg.text(x + 12, y + 10, text, size=9.5, family=_MONO, fill="#7a5c0c")
        elif kind == "mono":
            svg.text(x + 12, y + 11, text, size=10, family=_MONO, fill="#222")
        else:
            svg.text(x + 12, y + 11, text, size=10, fill="#888", style="italic")
        y += h


def _draw_chain(svg: _Svg, edges: dict, xs: dict, ay: float) -> None:
    """The chain arrows v_t -> d_t -> C_t between the boxes (grey and dashed when the next module ignores it)."""
    for src, dst in (("M", "P"), ("P", "F"), ("F", "A")):
        e = edges[(src, dst)]
        x1, x2 = xs[src] + _BOX_W + 2, xs[dst] - 3
        svg.path(f"M{x1:.1f},{ay:.1f} H{x2:.1f}", stroke="#333" if e.used else "#aaa", dash=None if e.used else "4,3")
        svg.text((x1 + x2) / 2, ay - 7, _sym(e.symbol), size=14, anchor="middle", raw=True,
                 fill="#222" if e.used else "#aaa", style="italic", family="DejaVu Serif, Times, serif")


def _draw_bus(svg: _Svg, edges: dict, xs: dict, top: float, box_h: float, bus_y: float) -> None:
    """The context bus: v_t, d_t also go straight into the action's context."""
    bus = [(src, edges[(src, "A")]) for src in ("M", "P") if edges[(src, "A")].used]
    if bus:
        ax = xs["A"] + _BOX_W / 2
        for src, e in bus:
            sx = xs[src] + _BOX_W / 2
            svg.path(f"M{sx:.1f},{top + box_h:.1f} V{bus_y:.1f}", stroke="#777", width=1.2, arrow=False)
            svg.text(sx + 6, bus_y - 6, _sym(e.symbol), size=12, raw=True, fill="#555", style="italic",
                     family="DejaVu Serif, Times, serif")
        left = min(xs[src] + _BOX_W / 2 for src, _ in bus)
        svg.path(f"M{left:.1f},{bus_y:.1f} H{ax:.1f} V{top + box_h + 3:.1f}", stroke="#777", width=1.2)
        svg.text(ax - 8, bus_y - 6, "context for A", size=10, fill="#777", anchor="end", style="italic")


def _draw_hooks(svg: _Svg, a: Anatomy, hooks_y: float) -> None:
    """The lifecycle hooks band: each hook, filled in the colour of the module that defines it, then the hooks slot's
    label when the harness has a hooks.py."""
    svg.rect(_X0, hooks_y, _W - 2 * _X0, 36, fill="#fafafa", stroke="#ccc", rx=6, width=1)
    svg.text(_X0 + 12, hooks_y + 22, "lifecycle hooks", size=11, weight="bold", fill="#555")
    px = _X0 + 120
    for h in HOOKS:
        owners = a.hooks[h]
        label = f"{h}" + (f" · {'+'.join(owners)}" if owners else "")
        if owners and _hook_calls_backbone(a) and "H" in owners:
            label += " · LLM"
        w = 7.0 * len(label) + 22
        if owners:
            color = _COLORS[owners[0]]
            svg.rect(px, hooks_y + 7, w, 22, fill=color, stroke=color, rx=11, width=1)
            svg.text(px + w / 2, hooks_y + 22, label, size=11, fill="#fff", anchor="middle", family=_MONO)
        else:
            svg.rect(px, hooks_y + 7, w, 22, fill="#fff", stroke="#bbb", rx=11, width=1, dash="3,3")
            svg.text(px + w / 2, hooks_y + 22, label, size=11, fill="#aaa", anchor="middle", family=_MONO)
        px += w + 14
    if "H" in a.slots:  # the hooks slot (hooks.py): name what fills it
        svg.text(px, hooks_y + 22, f"H: {a.slots['H'].label}", size=11, weight="bold", fill=_COLORS["H"])


def _draw_environment(svg: _Svg, xs: dict, top: float, box_h: float, env_y: float, ay: float) -> None:
    """The environment and the loop: e_t from the action into it, o_t+1 from it back into M."""
    env_x, env_w = _X0 + 210, _W - 2 * _X0 - 420
    svg.rect(env_x, env_y, env_w, 48, fill="#f1f1ee", stroke="#555", width=1.4, rx=8)
    svg.text(_W / 2, env_y + 21, "Environment", size=14, weight="bold", anchor="middle", fill="#333")
    svg.text(_W / 2, env_y + 38, "steps the tool call, returns the next observation (trusted parent process)",
             size=10, anchor="middle", fill="#777")
    ex, ey = xs["A"] + _BOX_W, top + box_h / 2
    rx_ = _W - 18
    svg.path(f"M{ex:.1f},{ey:.1f} H{rx_:.1f} V{env_y + 24:.1f} H{env_x + env_w + 3:.1f}", stroke="#333")
    svg.text(rx_ - 12, env_y + 16, _sym("e_t") + " = Decision(tool, args)", size=11, raw=True,
             fill="#333", anchor="end")
    lx = 18
    svg.path(f"M{env_x:.1f},{env_y + 24:.1f} H{lx:.1f} V{ay:.1f} H{xs['M'] - 3:.1f}", stroke="#333")
    svg.text(lx + 12, env_y + 16, _sym("o_t+1") + " observation → M.update", size=11, raw=True, fill="#333")


def _document(svg: _Svg, a: Anatomy, height: float) -> str:
    """The drawn parts wrapped in a standalone SVG document (arrow markers, title, white background)."""
    defs = ('<defs>'
            '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>'
            '<marker id="arrow-grey" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#aaa"/></marker>'
            '<marker id="arrow-gold" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#b08a1e"/></marker>'
            '</defs>')
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height:.0f}" '
            f'viewBox="0 0 {_W} {height:.0f}" role="img" aria-label="anatomy of harness {escape(a.name, _QUOTE)}">'
            f'<title>{escape(a.name)}: harness anatomy</title>{defs}'
            f'<rect width="100%" height="100%" fill="#ffffff"/>')
    return head + "".join(svg.parts) + "</svg>\n"
