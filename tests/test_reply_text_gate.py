"""ReplyTextGate: a reply's text is the detector's context from its first
audio, in every host (LiveKit's attach, Pipecat's ReplyTextTap)."""

from __future__ import annotations

from turnkit.detectors.reply_text import ReplyTextGate


def test_text_before_the_audio_waits_for_it() -> None:
    gate = ReplyTextGate()
    assert gate.text(" Can I have the order number? ") is None
    assert gate.started() == "Can I have the order number?"
    assert gate.started() is None  # handed once


def test_text_while_the_agent_is_audible_is_context_at_once() -> None:
    gate = ReplyTextGate()
    gate.started()
    assert gate.text("And the postcode?") == "And the postcode?"
    assert gate.text("   ") is None


def test_a_reply_cut_before_its_audio_is_never_handed() -> None:
    gate = ReplyTextGate()
    gate.text("Let me check.")
    gate.stopped()  # LiveKit: the state left "thinking" without speaking
    assert gate.started() is None
    gate.stopped()
    gate.text("Let me check.")
    gate.cancel()  # Pipecat: an InterruptionFrame before its audio
    assert gate.started() is None
