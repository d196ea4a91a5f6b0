"""Talking to OpenAI-compatible engines (llama-server, vLLM, SGLang).

For now: the next-token log-probability helper and the LLM end-of-turn
scorer (:class:`~turnkit.llm.eou.LLMEndOfTurn`) behind the ``llm-eou``
detector; the streaming chat client (:class:`~turnkit.llm.client.ChatClient`:
TTFT, prefix-cache hits, cancellation that stops the engine).
"""

from turnkit.llm.client import ChatClient, ChatResult, ChatStream, LLMError, LLMTimeout, ToolCall
from turnkit.llm.eou import CHAT_TEMPLATES, ChatTemplate, EouResult, LLMEndOfTurn
from turnkit.llm.logprobs import EngineError, NextToken, next_token_logprobs

__all__ = [
    "CHAT_TEMPLATES",
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "ChatTemplate",
    "EngineError",
    "EouResult",
    "LLMEndOfTurn",
    "LLMError",
    "LLMTimeout",
    "NextToken",
    "ToolCall",
    "next_token_logprobs",
]
