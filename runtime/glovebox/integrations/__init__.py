"""Tool providers for agent frameworks, each in its own optional extra.

Each module turns the tools a principal may see into one framework's native
tool objects that call ``Runtime.call`` / ``Runtime.acall`` as that principal:

- ``glovebox.integrations.langchain`` (``pip install 'glovebox-runtime[langchain]'``; with
  ``[langgraph]`` its tools pause a LangGraph graph for approval)
- ``glovebox.integrations.llama_index`` (``pip install 'glovebox-runtime[llama-index]'``)
- ``glovebox.integrations.openai_agents`` (``pip install 'glovebox-runtime[openai-agents]'``)
- ``glovebox.integrations.pydantic_ai`` (``pip install 'glovebox-runtime[pydantic-ai]'``)

A call the policy holds for approval pauses the agent through the framework's own
human-in-the-loop mechanism, carrying glovebox's approval id (each module's
docstring says how it resumes); ``tools(..., approvals="error")`` answers the
error line instead. Importing this package imports no framework; importing one of the modules
without its extra raises an ``ImportError`` naming the extra to install.
"""

__all__: list[str] = []
