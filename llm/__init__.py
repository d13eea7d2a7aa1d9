"""Chat models from config.yaml `models[]`: a shared library for every component that calls a model
(the agent runner, the subagent executor, the memory updater).

    from llm.models import create_chat_model   # loads LangChain; `import llm` alone does not

create_chat_model(config, name) -> BaseChatModel; `llm.errors.ModelConfigError` when it cannot.
"""
