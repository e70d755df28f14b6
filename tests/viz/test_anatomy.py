"""Harness anatomy derived from code: seeds, a generated-style harness with its own classes, errors, SVG, Table 2."""
import shutil
import textwrap
import xml.etree.ElementTree as ET

import pytest

from jitlab.errors import HarnessError
from jitlab.harness import load_harness, seed_names
from jitlab.viz.anatomy import Anatomy, anatomy
from jitlab.viz.anatomy_svg import to_svg
from jitlab.viz.anatomy_table import save_diagrams, summary_row, table, write_table

GENERATED = {
    "memory.py": '''
        """A generated memory: a sliding window plus a backbone-written summary."""


        class Memory:
            """Sliding window of recent events; older ones are summarised by the backbone."""
            window = 4

            def reset(self, ctx):
                self.recent = []
                self.summary = ""

            def update(self, event, ctx):
                self.recent.append(event)
                if len(self.recent) > self.window:
                    self._fold(ctx)

            def _fold(self, ctx):
                old, self.recent = self.recent[:-self.window], self.recent[-self.window:]
                self.summary = summarise(ctx, self.summary, old)

            def view(self, ctx):
                from jitlab.protocol import View
                return View(self.summary + "\\n" + "\\n".join(e.content for e in self.recent), list(self.recent))


        def summarise(ctx, summary, events):
            llm = ctx.llm
            return llm.chat([{"role": "user", "content": summary + str(events)}]).text
    ''',
    "planning.py": '''
        from jitlab.protocol import Directive


        class Planner:
            def reset(self, ctx):
                self.steps = []

            def plan(self, view, ctx):
                if not self.steps:
                    self.steps = view.text.splitlines()[:3]
                return Directive(self.steps[0] if self.steps else "")
    ''',
    "tool_policy.py": '''
        from jitlab.protocol import Capability

        FINISH = Capability("finish", "end the task with an answer", {"properties": {"answer": {"type": "string"}}})


        class CapabilityPolicy:
            def select(self, directive, view, registry, ctx):
                return [c for c in registry if c.name in directive.text] + [FINISH]
    ''',
    "action.py": '''
        from jitlab.protocol import Decision


        class Action:
            """Generated action: ask the backbone for one command."""
            temperature = 0.0

            def act(self, context, ctx):
                reply = ctx.llm.chat([{"role": "user", "content": context.view.text}],
                                     temperature=self.temperature)
                return Decision("act", {"command": reply.text.strip()})

            def pre_action(self, ctx, context, decision):
                if not decision.args.get("command"):
                    return Decision("finish", {"answer": ""})
                return None
    ''',
    "hooks.py": '''
        class Hooks:
            def post_feedback(self, ctx, decision, obs):
                ctx.state["last_reward"] = obs.reward
    ''',
    "prompt.yaml": "{}\n",
    "description.yaml": "name: generated-one\nlineage: [generated]\n",
}


@pytest.fixture
def generated(tmp_path):
    folder = tmp_path / "gen"
    folder.mkdir()
    for name, text in GENERATED.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def test_react_anatomy_from_code():
    a = anatomy("react")
    m, p, f, act = (a.slots[s] for s in "MPFA")
    assert m.label == "FullHistory" and m.library_bases == ["jitlab.modules.basic.FullHistory"]
    assert "events" in m.state and m.config == {"max_chars": 3000}
    assert p.label == "NoPlanner" and p.constant_output
    assert f.label == "FullRegistry" and not f.reads["directive"]
    assert act.label == "ReActAction" and act.calls_backbone
    assert "chat" in act.backbone_kinds
    assert any(c.path == ["act"] and c.expr == "ctx.llm.chat" for c in act.backbone)
    assert not (m.calls_backbone or p.calls_backbone or f.calls_backbone)
    flow = {(e.src, e.dst): e.used for e in a.flow}
    assert flow[("F", "A")] and flow[("M", "A")] and not flow[("P", "F")]


def test_random_action_does_not_call_backbone():
    a = anatomy("random")
    assert a.slots["A"].label == "RandomAction"
    assert not any(s.calls_backbone for s in a.slots.values())
    assert "rng" in a.slots["A"].state


def test_label_ignores_description_yaml(tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(load_harness("react").folder, folder)
    (folder / "description.yaml").write_text("name: liar\nmodules: {M: graph memory, A: voting}\n")
    row = summary_row(folder)
    assert row["name"] == "liar" and row["M"] == "FullHistory" and row["A"] == "ReActAction"


def test_generated_harness_with_own_classes(generated):
    a = anatomy(generated)
    m, p, f, act = (a.slots[s] for s in "MPFA")
    assert not m.library_bases and m.label.startswith("Sliding window of recent events")
    assert m.config == {"window": 4} and {"recent", "summary"} <= set(m.state)
    # reached through update -> _fold -> summarise (a module function with an aliased ctx.llm)
    assert [c.path for c in m.backbone] == [["update", "_fold", "summarise"]]
    assert act.calls_backbone and act.backbone[0].path == ["act"] and act.backbone[0].expr == "ctx.llm.chat"
    assert act.hooks == ["pre_action"] and "finish" in act.tools_emitted
    assert not p.calls_backbone and p.reads["view"] and not p.constant_output
    assert f.tools_added == ["finish"] and f.reads["directive"] and not f.reads["view"]
    assert a.slots["H"].hooks == ["post_feedback"] and not a.slots["H"].calls_backbone
    assert a.hooks["pre_action"] == ["A"] and a.hooks["post_feedback"] == ["H"]
    assert summary_row(a)["calls_backbone"] == "M, A"


def test_library_subclass_override_is_marked(tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(load_harness("react").folder, folder)
    (folder / "memory.py").write_text(textwrap.dedent('''
        from jitlab.modules.basic import FullHistory


        class Memory(FullHistory):
            def view(self, ctx):
                reply = ctx.llm.chat([{"role": "user", "content": "summarise"}])
                return super().view(ctx)
    '''))
    m = anatomy(folder).slots["M"]
    assert m.label == "FullHistory*" and m.overrides == ["view"] and m.calls_backbone


def test_helper_class_and_callbacks_are_followed(generated):
    (generated / "action.py").write_text(textwrap.dedent('''
        from collections import Counter

        from jitlab.protocol import Decision


        class Rollout:
            def __init__(self, seed):
                self.seed = seed

            def run(self, ctx, text):
                backbone = ctx.llm
                return backbone.chat([{"role": "user", "content": text}], seed=self.seed).text


        class Action:
            """Ensemble: K rollouts, majority vote."""
            k = 3

            def act(self, context, ctx):
                votes = list(map(self._one, range(self.k), [ctx] * self.k, [context] * self.k))
                return Decision("act", {"command": Counter(votes).most_common(1)[0][0]})

            def _one(self, i, ctx, context):
                return Rollout(i).run(ctx, context.view.text)
    '''))
    act = anatomy(generated).slots["A"]
    assert [c.path for c in act.backbone] == [["act", "_one", "Rollout.run"]]
    assert act.backbone[0].expr == "backbone.chat" and act.config == {"k": 3}


@pytest.mark.parametrize("missing", ["memory.py", "action.py"])
def test_missing_module_is_a_clear_error(generated, missing):
    (generated / missing).unlink()
    with pytest.raises(HarnessError, match=f"missing {missing}") as err:
        anatomy(generated)
    assert err.value.file == missing


def test_svg_is_xml_with_the_four_slots(generated, tmp_path):
    for a in (anatomy("react"), anatomy(generated)):
        svg = to_svg(a)
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        text = " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
        for role in ("Memory", "Planner", "CapabilityPolicy", "Action", "Environment", "Backbone"):
            assert role in text
        assert a.slots["M"].label.rstrip("*")[:10] in text
        assert isinstance(a, Anatomy) and a._repr_svg_() == svg
    path = anatomy("react").save(tmp_path / "fig" / "react.svg")
    assert ET.parse(path).getroot() is not None


def test_svg_escapes_odd_text(generated):
    (generated / "description.yaml").write_text('name: "a<b & \\"c\\""\n')
    memory = (generated / "memory.py").read_text()
    (generated / "memory.py").write_text(memory.replace("Sliding window of recent events", "Keeps <events> & 'more'"))
    a = anatomy(generated)
    assert a.name == 'a<b & "c"' and a.slots["M"].label.startswith("Keeps <events>")
    ET.fromstring(to_svg(a))


def test_table_and_write(tmp_path):
    df = table(["react", "random"])
    assert list(df.columns) == ["name", "M", "P", "F", "A", "calls_backbone", "hooks"]
    assert df.set_index("name").loc["react", "calls_backbone"] == "A"
    assert df.set_index("name").loc["random", "calls_backbone"] == ""
    md, csv = write_table(df, tmp_path)
    assert md.name == "table2_seed_bank.md" and csv.name == "table2_seed_bank.csv"
    lines = md.read_text().splitlines()
    assert lines[0].startswith("| name | M | P | F | A") and len(lines) == 2 + len(df)
    assert "ReActAction" in csv.read_text()


def test_every_seed_has_an_anatomy(tmp_path):
    names = seed_names()
    paths = save_diagrams(names, tmp_path)
    assert [p.stem for p in paths] == [anatomy(n).name for n in names]
    for name, path in zip(names, paths, strict=True):
        assert set("MPFA") <= set(anatomy(name).slots)
        ET.parse(path)


def test_a_composed_hooks_slot_is_drawn(tmp_path):
    """Issue 29: a harness whose hooks.py compose filled shows the H slot, its hooks and its label in the SVG."""
    from jitlab.harness import read_files, seed_bank_dir
    from jitlab.jit.generate.library import Choice, choices_of, render_files
    choices = choices_of(read_files(seed_bank_dir() / "react"))
    choices["H"] = Choice("H", "library", "jitlab.modules.hooks:RuleHooks", {"block_after": 1})
    folder = tmp_path / "hooked"
    folder.mkdir()
    for name, text in render_files(choices, name="hooked", lineage={}).items():
        (folder / name).write_text(text)
    a = anatomy(folder)
    assert "H" in a.slots and "H" in a.hooks["pre_action"] and "H" in a.hooks["post_feedback"]
    assert "H: " in a._repr_svg_() and "H" not in anatomy("react").slots
