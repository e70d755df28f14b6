"""jitlab.runner.drive_episode: the one episode driver of `jitlab run` and `jitlab jit` (real toy suite, scripted
TEST DOUBLE backbone)."""
from jitlab.envs.toy import ToySuite
from jitlab.errors import InfraError
from jitlab.harness import load_harness
from jitlab.llm.scripted import get_scripted
from jitlab.runner import drive_episode
from jitlab.runtime import Budget, HarnessAgent, LLMHandle


class _Closing(HarnessAgent):
    closed = False

    def close(self):
        self.closed = True


def test_runs_the_episode_and_closes_agent_and_env():
    suite, budget = ToySuite(), Budget()
    llm = LLMHandle(get_scripted("pick-hash"), budget)
    envs, agents = [], []

    def make_agent(env):
        envs.append(env)
        agents.append(_Closing(load_harness("react"), llm))
        return agents[-1]
    result = drive_episode(suite, suite.tasks()[0], make_agent, llm, budget, seed=0)
    assert result.status == "ok" and result.steps > 0 and agents[0].closed


def test_an_infra_error_while_making_the_env_or_agent_is_an_infra_error_result():
    class BrokenSuite(ToySuite):
        def make_env(self, spec):
            raise InfraError("game generator crashed")
    suite, budget = BrokenSuite(), Budget()
    llm = LLMHandle(get_scripted("pick-hash"), budget)
    result = drive_episode(suite, suite.tasks()[0], lambda env: None, llm, budget, seed=0)
    assert (result.status, result.error) == ("infra_error", "game generator crashed")

    def no_sandbox(env):
        raise InfraError("bubblewrap is unusable")
    result = drive_episode(ToySuite(), ToySuite().tasks()[0], no_sandbox, llm, budget, seed=0)
    assert (result.status, result.error) == ("infra_error", "bubblewrap is unusable")
