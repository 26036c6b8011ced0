"""An OpenAI Agents SDK run over glovebox tools, with a scripted model (runs offline)."""

import asyncio

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from _calc import runtime
from glovebox.integrations.openai_agents import tools


class Scripted(Model):
    """Ask for calc once; answer with what the tool said."""

    async def get_response(self, system_instructions, input, *args, **kwargs):
        outputs = [item["output"] for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"]
        if not outputs:
            call = ResponseFunctionToolCall(type="function_call", call_id="call_1", name="calc",
                                            arguments='{"expression": "6 * 7"}')  # fmt: skip
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        print(f"success: {outputs[0]}")
        text = ResponseOutputText(type="output_text", text="6 * 7 is 42.", annotations=[])
        message = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[text])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


set_tracing_disabled(True)
with runtime() as rt:
    agent = Agent(name="calculator", model=Scripted(), tools=tools(rt, principal="agent"))
    print(asyncio.run(Runner.run(agent, "What is 6 * 7?")).final_output)
