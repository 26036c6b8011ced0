"""A pydantic-ai Agent over glovebox tools, with a scripted model (runs offline)."""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from _calc import runtime
from glovebox.integrations.pydantic_ai import tools


def model(messages, info):
    """Ask for calc once; answer with what the tool said."""
    returned = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("calc", {"expression": "6 * 7"}, tool_call_id="call_1")])
    print(f"{returned[0].outcome}: {returned[0].content}")
    return ModelResponse(parts=[TextPart("6 * 7 is 42.")])


with runtime() as rt:
    print(Agent(FunctionModel(model), tools=tools(rt, principal="agent")).run_sync("What is 6 * 7?").output)
