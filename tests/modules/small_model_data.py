"""Recorded observations for the small-model mechanism tests (tests/modules/data/small_model_observations.json).

Recorded from the real suites (TextWorld dev games, BabyAI dev episodes, DBBench dev tasks): the texts and
admissible commands the agent was shown, the commands sent, the rewards. The walkthrough entries replay the
game's own walkthrough (recorded once, for the texts only); the others are small_model harness episodes with
the scripted:pick-first TEST DOUBLE."""
import json
from pathlib import Path

from jitlab.protocol import Capability

OBS = json.loads((Path(__file__).parent / "data" / "small_model_observations.json").read_text())
ACT = Capability("act", "Issue one text command.", {"type": "object", "properties": {"command": {"type": "string"}}})


class DoubleLLM:
    """A TEST DOUBLE backbone handle: ``score`` returns ``scores`` (or raises NotImplementedError when None) and
    records each call; ``chat`` returns ``reply``."""

    def __init__(self, scores=None, reply="1"):
        self.scores, self.reply, self.score_calls, self.chat_calls = scores, reply, [], []

    def score(self, messages, candidates):
        self.score_calls.append((messages, list(candidates)))
        if self.scores is None:
            raise NotImplementedError("double without score")
        return [self.scores(c) if callable(self.scores) else self.scores.get(c, -10.0) for c in candidates]

    def chat(self, messages, **params):
        from jitlab.protocol import Completion
        self.chat_calls.append((messages, params))
        return Completion(self.reply(messages) if callable(self.reply) else self.reply)
