"""Detector specs and registry; the silence detector on a virtual clock."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DetectorDriver

from turnkit.audio.vad import VADStep
from turnkit.clock import VirtualClock
from turnkit.detectors import DetectorSpecError, available, create_detector, parse_spec
from turnkit.detectors.silence import SilenceDetector
from turnkit.frames import AudioInFrame, TurnEndFrame, TurnResumedFrame

SR = 16000
FRAME_N = 512
FRAME_S = FRAME_N / SR
SILENCE = np.zeros(FRAME_N, dtype=np.float32)

# --- specs ----------------------------------------------------------------------


def test_parse_spec_splits_name_and_params():
    assert parse_spec("silence") == ("silence", {})
    assert parse_spec(" silence : stop_ms = 500 , x=1") == ("silence", {"stop_ms": "500", "x": "1"})
    assert parse_spec("silence:") == ("silence", {})


def test_silence_is_registered():
    assert available()["silence"] is SilenceDetector


def test_bare_silence_has_default_stop_ms_800():
    det = create_detector("silence", VirtualClock())
    assert isinstance(det, SilenceDetector)
    assert det.params.stop_ms == 800.0
    assert det.spec == "silence"


def test_silence_stop_ms_param_is_parsed_as_float():
    det = create_detector("silence:stop_ms=500", VirtualClock())
    assert det.params.stop_ms == 500.0
    assert isinstance(det.params.stop_ms, float)
    assert det.spec == "silence:stop_ms=500"


def test_unknown_detector_lists_the_known_ones():
    with pytest.raises(DetectorSpecError) as exc:
        create_detector("silense:stop_ms=500", VirtualClock())
    msg = str(exc.value)
    assert "'silense'" in msg
    assert "known" in msg
    for name in available():
        assert name in msg


def test_unknown_param_names_it_and_the_known_ones():
    with pytest.raises(DetectorSpecError) as exc:
        create_detector("silence:stop_msec=500", VirtualClock())
    msg = str(exc.value)
    assert "stop_msec" in msg
    assert "unknown parameter" in msg
    assert "known: stop_ms" in msg


@pytest.mark.parametrize("value", ["abc", "", "-1", "nan", "1e9"])
def test_bad_value_is_a_spec_error_naming_the_param(value):
    with pytest.raises(DetectorSpecError) as exc:
        create_detector(f"silence:stop_ms={value}", VirtualClock())
    assert "stop_ms" in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "spec", ["silence:stop_ms", "silence:=5", "silence:stop_ms=5,,", ":stop_ms=5", ""]
)
def test_malformed_spec_is_a_spec_error(spec):
    with pytest.raises(DetectorSpecError):
        parse_spec(spec)
    with pytest.raises(DetectorSpecError):
        create_detector(spec, VirtualClock())


def test_repeated_param_is_a_spec_error():
    # "silence:stop_ms=500,stop_ms=600" must not silently drop one setting.
    with pytest.raises(DetectorSpecError, match="stop_ms"):
        create_detector("silence:stop_ms=500,stop_ms=600", VirtualClock())


def test_detector_spec_error_is_a_value_error():
    assert issubclass(DetectorSpecError, ValueError)


# --- the silence detector ---------------------------------------------------------


def Driver(spec: str = "silence:stop_ms=500") -> DetectorDriver:
    return DetectorDriver(spec)


def ends(signals) -> list[tuple[int, TurnEndFrame]]:
    return [(i, s) for i, s in signals if isinstance(s, TurnEndFrame)]


async def test_silence_before_any_speech_never_ends_a_turn():
    d = Driver()
    assert await d.feed([0.0] * 100) == []


async def test_exactly_one_end_once_silence_reaches_stop_ms():
    d = Driver("silence:stop_ms=500")
    assert await d.feed([0.0] * 10) == []
    assert await d.feed([0.9] * 20) == []  # frames 10..29
    speech_end = d.vad.speech_end
    assert speech_end == pytest.approx(30 * FRAME_S)
    out = await d.feed([0.0] * 60)
    assert len(out) == 1
    i, end = out[0]
    assert isinstance(end, TurnEndFrame)
    assert end.detector == "silence:stop_ms=500"
    assert end.at == d.log[i][1]  # decided at the clock's now
    # the first frame at which 500 ms of silence had passed, not later
    assert end.at - speech_end >= 0.5 - 1e-9
    assert end.at - FRAME_S - speech_end < 0.5
    assert "ms silence" in end.reason


async def test_long_speech_never_ends_while_it_goes_on():
    d = Driver("silence:stop_ms=200")
    assert await d.feed([0.0] * 3 + [0.9] * 100) == []


async def test_low_confidence_speech_between_thresholds_does_not_end_the_turn():
    # 0.4 is between neg (0.35) and threshold: the VAD keeps speaking, though
    # speech_end stays put for more than stop_ms.
    d = Driver("silence:stop_ms=200")
    out = await d.feed([0.9] * 5 + [0.4] * 30)
    assert out == []
    assert d.clock.now() - d.vad.speech_end > 0.2


async def test_pause_shorter_than_stop_ms_does_not_end_or_resume():
    d = Driver("silence:stop_ms=500")
    out = await d.feed([0.9] * 10 + [0.0] * 12 + [0.9] * 10)  # 384 ms pause
    assert out == []


async def test_speech_after_the_end_resumes_and_the_next_silence_ends_again():
    d = Driver("silence:stop_ms=300")
    first = await d.feed([0.9] * 10 + [0.0] * 30)
    assert [type(s) for _, s in first] == [TurnEndFrame]
    again = await d.feed([0.9] * 10)
    assert [type(s) for _, s in again] == [TurnResumedFrame]
    i, resumed = again[0]
    assert d.log[i][2].started  # at the frame the VAD confirmed speech
    assert resumed.at == d.log[i][1]
    assert resumed.detector == "silence:stop_ms=300"
    later = await d.feed([0.0] * 40)
    assert [type(s) for _, s in later] == [TurnEndFrame]


async def test_no_second_end_without_new_speech():
    d = Driver("silence:stop_ms=300")
    out = await d.feed([0.9] * 10 + [0.0] * 200)
    assert len(ends(out)) == 1
    assert len(out) == 1


async def test_a_blip_after_the_end_neither_resumes_nor_ends_again():
    d = Driver("silence:stop_ms=300")
    out = await d.feed([0.9] * 10 + [0.0] * 30)
    assert len(out) == 1
    # one 32 ms frame above threshold: shorter than the VAD's start_ms
    assert await d.feed([0.95] + [0.0] * 60) == []


async def test_stop_ms_shorter_than_the_vad_stop_window_ends_when_the_vad_stops():
    d = Driver("silence:stop_ms=0")
    out = await d.feed([0.9] * 10 + [0.0] * 10)
    assert len(out) == 1
    i, _ = out[0]
    assert d.log[i][2].stopped  # the first frame the VAD no longer says speaking


async def test_reset_forgets_an_open_turn():
    d = Driver("silence:stop_ms=300")
    await d.feed([0.9] * 10)
    d.det.reset()
    d.vad.reset()
    assert await d.feed([0.0] * 30) == []


async def test_silence_detector_with_hand_built_vad_steps():
    clock = VirtualClock()
    det = create_detector("silence:stop_ms=800", clock)

    def frame(at: float, step: VADStep) -> AudioInFrame:
        return AudioInFrame(at=at, audio=SILENCE, sample_rate=SR, vad=step)

    speaking = VADStep(prob=0.9, speaking=True, started=True, speech_start=1.0, speech_end=2.0)
    await clock.advance_to(2.0)
    assert await det.on_audio(frame(2.0 - FRAME_S, speaking), speaking) == []
    quiet = VADStep(prob=0.0, speaking=False, stopped=True, speech_start=1.0, speech_end=2.0)
    await clock.advance_to(2.79)
    assert await det.on_audio(frame(2.79 - FRAME_S, quiet), quiet) == []
    await clock.advance_to(2.8)
    out = await det.on_audio(frame(2.8 - FRAME_S, quiet), quiet)
    assert [type(s) for s in out] == [TurnEndFrame]
    assert out[0].at == 2.8
    await clock.advance_to(10.0)
    assert await det.on_audio(frame(10.0 - FRAME_S, quiet), quiet) == []
