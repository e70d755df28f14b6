"""Capability policies: tool search, completion gate, delegation exposure."""
from jitlab.envs.dbbench import COMMIT_ANSWER, EXECUTE_SQL
from jitlab.envs.toy import ACT
from jitlab.modules.policy import DELEGATE, AgentDelegation, CompletionGate, ToolSearch
from jitlab.protocol import Capability, Directive, Event, View

REGISTRY = [
    Capability("web_search", "Search the web for pages about a topic."),
    Capability("send_email", "Send an email message to a recipient."),
    EXECUTE_SQL,
    Capability("calculator", "Evaluate an arithmetic expression."),
    Capability("read_file", "Read a text file from the workspace."),
    COMMIT_ANSWER,
    Capability("weather", "Get the weather forecast for a city."),
    ACT,
]


def _names(caps):
    return [c.name for c in caps]


def test_tool_search_returns_relevant_tools(make_ctx):
    ctx = make_ctx()
    policy = ToolSearch(top_k=3)
    policy.reset(ctx)
    sql = policy.select(Directive("run a SQL query on the table"), View(""), REGISTRY, ctx)
    assert _names(sql)[0] == "execute_sql" and len(sql) == 3
    mail = policy.select(Directive("email the report to the recipient"), View(""), REGISTRY, ctx)
    assert _names(mail)[0] == "send_email"
    ctx.state["tool_query"] = "weather forecast"
    assert _names(policy.select(Directive(""), View(""), REGISTRY, ctx))[0] == "weather"


def test_tool_search_reads_the_latest_observation_and_keeps_pinned_tools(make_ctx):
    ctx = make_ctx()
    policy = ToolSearch(top_k=1, always=("commit_answer",))
    policy.reset(ctx)
    view = View("", [Event("observation", "The spreadsheet file notes.txt is in the workspace.")])
    assert _names(policy.select(Directive(""), view, REGISTRY, ctx)) == ["read_file", "commit_answer"]
    assert _names(policy.select(Directive(""), View(""), [ACT], ctx)) == ["act"]


def test_completion_gate_exposes_answer_tools_after_the_check(make_ctx):
    ctx = make_ctx()
    ctx.task.max_steps = 15
    gate = CompletionGate(min_steps=1, require_plan_done=True)
    gate.reset(ctx)
    tools = [EXECUTE_SQL, COMMIT_ANSWER]
    ctx.step = 1
    assert _names(gate.select(Directive(""), View(""), tools, ctx)) == ["execute_sql"]
    ctx.step = 3
    assert _names(gate.select(Directive(""), View(""), tools, ctx)) == ["execute_sql"]   # plan not done
    ctx.state["plan_done"] = True
    assert _names(gate.select(Directive(""), View(""), tools, ctx)) == ["execute_sql", "commit_answer"]
    ctx.state["plan_done"] = False
    ctx.step = 12                                  # the last steps of the budget: everything is exposed
    assert "commit_answer" in _names(gate.select(Directive(""), View(""), tools, ctx))
    assert _names(gate.select(Directive(""), View(""), [COMMIT_ANSWER], ctx)) == ["commit_answer"]


def test_delegation_policy_adds_delegate_and_narrows_for_a_subagent(make_ctx):
    ctx = make_ctx()
    policy = AgentDelegation()
    policy.reset(ctx)
    tools = [EXECUTE_SQL, COMMIT_ANSWER]
    assert policy.select(Directive(""), View(""), tools, ctx) == tools + [DELEGATE]
    ctx.state["subagent"] = {"active": True, "tools": ["execute_sql"]}
    assert _names(policy.select(Directive(""), View(""), tools, ctx)) == ["execute_sql"]
