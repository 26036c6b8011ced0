"""A LangChain tool-calling loop over glovebox tools, with a scripted model (runs offline)."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from _calc import runtime
from glovebox.integrations.langchain import tools

with runtime() as rt:
    by_name = {tool.name: tool for tool in tools(rt, principal="agent")}
    # The model asks for calc twice: once well, once with an expression calc cannot parse.
    model = GenericFakeChatModel(messages=iter([
        AIMessage("", tool_calls=[{"name": "calc", "args": {"expression": "6 * 7"}, "id": "call_1"},
                                  {"name": "calc", "args": {"expression": "6 *"}, "id": "call_2"}]),
        AIMessage("6 * 7 is 42."),
    ]))  # fmt: skip
    history = [HumanMessage("What is 6 * 7?")]
    while True:
        reply = model.invoke(history)
        history.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            message = by_name[call["name"]].invoke(call)  # a ToolMessage; status="error" for a failed call
            print(f"{message.status}: {message.content}")
            history.append(message)
    print(reply.content)
