"""Hello, harness: the four modules of a harness written from scratch against jitlab.protocol, run on the toy suite.

    python examples/hello_harness.py                          # scripted:pick-hash, a deterministic TEST DOUBLE
    python examples/hello_harness.py --backbone embedded      # the embedded SmolLM2 model (CPU)
    jitlab show runs/hello-harness                            # its records, as for any run

A harness is four objects: Memory (events -> view), Planner (view -> directive), CapabilityPolicy (which tools
to expose) and Action (context -> the next tool call). They call the backbone only through ``ctx.llm``.
``Harness.from_modules`` makes a harness of the four classes and ``jitlab.run(config, harness=...)`` runs it like any
other (records, resume, ``jitlab show``). Saved as a folder (memory.py, planning.py,
tool_policy.py, action.py, prompt.yaml, description.yaml), the same classes run with
``jitlab run --harness path/to/folder``; the seeds in seed_bank/ are bigger examples.
"""
import argparse
import re

import jitlab
from jitlab.harness import Harness
from jitlab.protocol import Decision, Directive, View


class Memory:                                   # M: the last few events, as text
    def reset(self, ctx): self.events = []
    def update(self, event, ctx): self.events.append(f"{event.kind}: {event.content}")
    def view(self, ctx): return View("\n".join(self.events[-6:]))


class Planner:                                  # P: one fixed directive
    def reset(self, ctx): pass
    def plan(self, view, ctx): return Directive("Reach the goal; do not repeat a command that changed nothing.")


class CapabilityPolicy:                         # F: every tool of the task
    def reset(self, ctx): pass
    def select(self, directive, view, registry, ctx): return list(registry)


class Action:                                   # A: ask the backbone, map its reply onto an admissible command
    def reset(self, ctx): pass

    def act(self, context, ctx):
        options = context.observation.candidates
        prompt = (f"{context.task.description}\n{context.view.text}\n{context.directive.text}\nCommands:\n"
                  + "".join(f"- {c}\n" for c in options) + "Reply 'Action: <command>'.")
        reply = ctx.llm.chat([{"role": "user", "content": prompt}], max_new_tokens=32).text
        said = (re.findall(r"Action:\s*(.+)", reply) or [""])[0].strip()
        command = next((c for c in options if c.lower() == said.lower()), options[0] if options else said)
        return Decision(context.capabilities[0].name, {"command": command}, thought=reply)


def main(argv=None) -> list:
    """Run the harness on the first ``--limit`` toy dev tasks; returns their episode rows (status, steps, tokens)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backbone", default="scripted:pick-hash")
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--out", default="runs/hello-harness", help="run directory (rerunning resumes)")
    args = parser.parse_args(argv)
    harness = Harness.from_modules(memory=Memory, planner=Planner, policy=CapabilityPolicy, action=Action, name="hello")
    out = jitlab.run(jitlab.RunConfig(suite="toy", backbone=args.backbone, limit=args.limit, out=args.out, quiet=True),
                     harness=harness)
    rows = list(jitlab.load(out)["episodes"].itertuples())
    for r in rows:
        print(f"{r.task_id}: {r.status} success={bool(r.success)} steps={r.steps} tokens={r.tokens}")
    return rows


if __name__ == "__main__":
    main()
