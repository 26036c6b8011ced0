"""A LlamaIndex FunctionAgent over glovebox tools, with a scripted model (runs offline)."""

import asyncio

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM

from _calc import runtime
from glovebox.integrations.llama_index import tools


def model(messages, **kwargs):
    """Ask for calc once; answer once its result is in."""
    if any(message.role == MessageRole.TOOL for message in messages):
        return ChatMessage(role="assistant", content="6 * 7 is 42.")
    call = ToolCallBlock(tool_call_id="call_1", tool_name="calc", tool_kwargs={"expression": "6 * 7"})
    return ChatMessage(role="assistant", blocks=[call])


async def main() -> None:
    with runtime() as rt:
        agent = FunctionAgent(tools=tools(rt, principal="agent"), llm=MockFunctionCallingLLM(response_generator=model))
        handler = agent.run("What is 6 * 7?")
        async for event in handler.stream_events():
            if isinstance(event, ToolCallResult):
                print(f"{'error' if event.tool_output.is_error else 'success'}: {event.tool_output.content}")
        print(await handler)


asyncio.run(main())
