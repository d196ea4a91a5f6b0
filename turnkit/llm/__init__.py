"""Talking to OpenAI-compatible engines (llama-server, vLLM, SGLang).

The next-token log-probability helper and the LLM end-of-turn scorer
(:class:`~turnkit.llm.eou.LLMEndOfTurn`) behind the ``llm-eou`` detector; the
streaming chat client (:class:`~turnkit.llm.client.ChatClient`: TTFT,
prefix-cache hits, cancellation that stops the engine); the serving side:
stable-prefix prompt layout (:class:`~turnkit.llm.prompt.PromptLayout`),
:func:`~turnkit.llm.prewarm.prewarm`, gateway routing headers
(:mod:`turnkit.llm.routing`); ``prompt_lint``, ``cache_report`` and
``loadtest`` back the CLI commands of the same names.
"""

from turnkit.llm.client import ChatClient, ChatResult, ChatStream, LLMError, LLMTimeout, ToolCall
from turnkit.llm.eou import CHAT_TEMPLATES, ChatTemplate, EouResult, LLMEndOfTurn
from turnkit.llm.logprobs import EngineError, NextToken, next_token_logprobs
from turnkit.llm.prewarm import PrewarmResult, prewarm
from turnkit.llm.prompt import CallPrompt, ChatRequest, LayoutError, PromptLayout
from turnkit.llm.routing import routing_headers, routing_key

__all__ = [
    "CHAT_TEMPLATES",
    "CallPrompt",
    "ChatClient",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "ChatTemplate",
    "EngineError",
    "EouResult",
    "LLMEndOfTurn",
    "LLMError",
    "LLMTimeout",
    "LayoutError",
    "NextToken",
    "PrewarmResult",
    "PromptLayout",
    "ToolCall",
    "next_token_logprobs",
    "prewarm",
    "routing_headers",
    "routing_key",
]
