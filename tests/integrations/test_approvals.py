"""Each framework pauses its agent on a call glovebox holds for approval, and resumes it with the decision.

A real agent loop with the framework's own scripted model, a real Runtime and
guest, and a policy that holds ``sensitive`` for approval: the run pauses
carrying glovebox's approval id; the request is decided through the Runtime
(``approve`` or ``deny``, as the console or the CLI would); the run resumes the
framework's way, and the model reads the tool's real output (approved) or the
refusal with the approver's reason (denied).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import glovebox

from .test_integrations import agent_calls, openai_agents_model, rt  # noqa: F401 (the fixture)

#: What the sensitive tool is asked, and what it answers once approved (it echoes its input).
ASKED = {"a": 1}
REASON = "not with production data"
DECISIONS = ["approve", "deny"]


def decide(runtime: glovebox.Runtime, approval_id: str, decision: str) -> None:
    """Decide the request through glovebox, as an approver."""
    assert [a.id for a in runtime.pending_approvals()] == [approval_id], "the pause filed one request"
    if decision == "approve":
        runtime.approve(approval_id, principal="boss")
    else:
        runtime.deny(approval_id, principal="boss", reason=REASON)


def check_answer(answer: str, decision: str, runtime: glovebox.Runtime) -> None:
    """The model read the tool's real output, or the refusal; the audit holds the one call it made."""
    outcomes = [outcome for tool, _, outcome in agent_calls(runtime) if tool == "sensitive"]
    if decision == "approve":
        assert json.loads(answer) == ASKED
        assert outcomes == ["approval_required", "ok"]
    else:
        assert answer.startswith("glovebox error permission_denied (retryable: no"), answer
        assert REASON in answer and "'boss' denied" in answer
        assert outcomes == ["approval_required", "permission_denied"]


@pytest.mark.parametrize("decision", DECISIONS)
def test_pydantic_ai_defers_the_call_and_resumes_with_the_decision(rt: glovebox.Runtime, decision: str) -> None:  # noqa: F811
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from glovebox.integrations import pydantic_ai

    read: list[ToolReturnPart] = []

    def model(messages: Any, info: AgentInfo) -> ModelResponse:
        returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returned:
            read.extend(returned)
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("sensitive", ASKED, tool_call_id="s1")])

    agent = Agent(
        FunctionModel(model),
        tools=pydantic_ai.tools(rt, principal="agent"),
        output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
    )
    paused = asyncio.run(agent.run("go"))
    assert isinstance(paused.output, DeferredToolRequests), paused.output
    ids = pydantic_ai.approval_ids(paused.output)
    assert list(ids) == ["s1"] and read == []
    decide(rt, ids["s1"], decision)
    resumed = asyncio.run(
        agent.run(
            message_history=paused.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"s1": True})
        )
    )
    assert resumed.output == "done"
    assert len(read) == 1 and read[0].outcome == ("success" if decision == "approve" else "failed")
    check_answer(str(read[0].content), decision, rt)


@pytest.mark.parametrize("decision", DECISIONS)
def test_openai_agents_interrupts_the_run_and_resumes_it_from_its_state(rt: glovebox.Runtime, decision: str) -> None:  # noqa: F811
    from agents import Agent, Runner, set_tracing_disabled

    from glovebox.integrations import openai_agents

    set_tracing_disabled(True)
    model = openai_agents_model([("sensitive", json.dumps(ASKED)), ("calc", json.dumps({"expression": "6 * 7"}))])
    agent = Agent(name="a", model=model, tools=openai_agents.tools(rt, principal="agent"))
    paused = asyncio.run(Runner.run(agent, "go"))
    assert len(paused.interruptions) == 1 and paused.final_output is None
    item = paused.interruptions[0]
    approval_id = openai_agents.approval_id(item)
    assert approval_id is not None and item.tool_name == "sensitive"
    decide(rt, approval_id, decision)
    state = paused.to_state()
    state.approve(item)  # the call is made again: glovebox answers with the decision
    resumed = asyncio.run(Runner.run(agent, state))
    assert resumed.final_output == "done" and resumed.interruptions == []
    outputs = [
        item["output"]
        for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    check_answer(outputs[0], decision, rt)
    assert json.loads(outputs[1]) == {"value": 42}, "a call glovebox does not hold runs at once, exactly once"
    assert [tool for tool, _, _ in agent_calls(rt)].count("calc") == 1


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
@pytest.mark.parametrize("decision", DECISIONS)
def test_llama_index_waits_for_a_human_response_event(rt: glovebox.Runtime, decision: str) -> None:  # noqa: F811
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ToolCallBlock
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.workflow import HumanResponseEvent

    from glovebox.integrations import llama_index

    read: list[str] = []

    def model(messages: Any, **kwargs: Any) -> Any:
        answers = [str(m.content) for m in messages if m.role == MessageRole.TOOL]
        if answers:
            read[:] = answers
            return ChatMessage(role="assistant", content="done")
        call = ToolCallBlock(tool_call_id="s1", tool_name="sensitive", tool_kwargs=ASKED)
        return ChatMessage(role="assistant", blocks=[call])

    agent = FunctionAgent(
        tools=llama_index.tools(rt, principal="agent"), llm=MockFunctionCallingLLM(response_generator=model)
    )
    asked: list[Any] = []

    async def run() -> Any:
        handler = agent.run("go")
        async for event in handler.stream_events():
            if isinstance(event, llama_index.ApprovalRequested):
                asked.append(event)
                assert read == [], "the agent is paused: the model has read nothing yet"
                decide(rt, event.approval_id, decision)
                handler.ctx.send_event(HumanResponseEvent(response=decision, approval_id=event.approval_id))
        return await handler

    reply = asyncio.run(run())
    assert str(reply) == "done"
    assert len(asked) == 1 and asked[0].tool_name == "sensitive" and asked[0].principal == "agent"
    assert len(read) == 1
    check_answer(read[0], decision, rt)


@pytest.mark.parametrize("decision", DECISIONS)
def test_langgraph_interrupts_the_graph_and_resumes_with_a_command(rt: glovebox.Runtime, decision: str) -> None:  # noqa: F811
    pytest.importorskip("langgraph", reason="LangGraph is not installed (the langgraph extra)")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.types import Command

    from glovebox.integrations import langchain

    from .test_integrations import langchain_model

    tools = langchain.tools(rt, principal="agent", pattern="sensitive")
    model = langchain_model([("sensitive", ASKED)]).bind_tools(tools)
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    paused = app.invoke({"messages": [HumanMessage("go")]}, config)
    (asked,) = paused["__interrupt__"]
    approval_id = asked.value[langchain.APPROVAL_KEY]
    assert asked.value == {langchain.APPROVAL_KEY: approval_id, "tool": "sensitive", "principal": "agent"}
    assert not any(isinstance(m, ToolMessage) for m in paused["messages"]), "the graph paused before the answer"
    decide(rt, approval_id, decision)
    done = app.invoke(Command(resume=decision), config)
    (answer,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert done["messages"][-1].content == "done"
    assert answer.status == ("success" if decision == "approve" else "error")
    check_answer(str(answer.content), decision, rt)


def test_langgraph_without_a_checkpointer_cannot_pause_and_reads_the_error_line(rt: glovebox.Runtime) -> None:  # noqa: F811
    pytest.importorskip("langgraph", reason="LangGraph is not installed (the langgraph extra)")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from glovebox.integrations import langchain

    from .test_integrations import langchain_model

    tools = langchain.tools(rt, principal="agent", pattern="sensitive")
    model = langchain_model([("sensitive", ASKED)]).bind_tools(tools)
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    done = graph.compile().invoke({"messages": [HumanMessage("go")]})
    assert "__interrupt__" not in done
    (answer,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and str(answer.content).startswith("glovebox error approval_required")


def test_outside_an_agent_loop_or_asked_to_the_approval_is_the_error_line(rt: glovebox.Runtime) -> None:  # noqa: F811
    from glovebox.integrations import langchain, llama_index, openai_agents, pydantic_ai

    outside = next(t for t in llama_index.tools(rt, principal="agent") if t.metadata.name == "sensitive")
    for answer in (outside.call(**ASKED), asyncio.run(outside.acall(**ASKED))):
        assert answer.is_error and answer.content.startswith("glovebox error approval_required"), answer.content
    plain = next(t for t in langchain.tools(rt, principal="agent") if t.name == "sensitive")
    assert plain.invoke(ASKED).startswith("glovebox error approval_required")
    agents_tool = next(
        t for t in openai_agents.tools(rt, principal="agent", approvals="error") if t.name == "sensitive"
    )
    assert agents_tool.needs_approval is False
    for module in (langchain, llama_index, openai_agents, pydantic_ai):
        with pytest.raises(ValueError, match="approvals must be 'pause' or 'error'"):
            module.tools(rt, principal="agent", approvals="later")  # type: ignore[arg-type]
