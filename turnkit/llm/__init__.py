"""Talking to OpenAI-compatible engines (llama-server, vLLM, SGLang).

For now: the next-token log-probability helper and the LLM end-of-turn
scorer (:class:`~turnkit.llm.eou.LLMEndOfTurn`) behind the ``llm-eou``
detector. The streaming client (TTFT, cancellation, prewarm) comes later.
"""

from turnkit.llm.eou import CHAT_TEMPLATES, ChatTemplate, EouResult, LLMEndOfTurn
from turnkit.llm.logprobs import EngineError, NextToken, next_token_logprobs

__all__ = [
    "CHAT_TEMPLATES",
    "ChatTemplate",
    "EngineError",
    "EouResult",
    "LLMEndOfTurn",
    "NextToken",
    "next_token_logprobs",
]
