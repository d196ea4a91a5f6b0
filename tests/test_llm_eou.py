"""llm-eou: P(end-of-turn token) from an OpenAI-compatible engine.

Most tests run against the real local engine (llama-server + SmolLM2-135M,
see tests/engine.py); they skip without it unless TURNKIT_REQUIRE_ENGINE=1.
The timeout and engine-down tests use a fake slow server and a closed port.
"""

from __future__ import annotations

import http.server
import math
import threading
import time
from pathlib import Path

import pytest
from conftest import FRAME_S, DetectorDriver
from engine import closed_port, running_llama_server

from turnkit.clock import VirtualClock
from turnkit.detectors import DetectorSpecError, available, create_detector
from turnkit.detectors.llm_eou import LLMEouDetector
from turnkit.frames import TurnEndFrame, TurnResumedFrame
from turnkit.llm import EngineError, LLMEndOfTurn
from turnkit.llm.eou import (
    CALIBRATION,
    CHAT_TEMPLATES,
    SMOLLM2_SYSTEM,
    ChatTemplate,
    TemplateError,
    calibration_for,
    estimate_tokens,
    model_key,
    normalize_text,
    resolve_template,
)
from turnkit.llm.logprobs import parse_completion

ROOT = Path(__file__).resolve().parent.parent

COMPLETE = "i'd like to book a table for two please"
CUT = "i'd like to book a table for"
AGENT = "Thanks for calling Luigi's. How can I help you?"


@pytest.fixture(scope="module")
def engine() -> str:
    with running_llama_server() as base_url:
        yield base_url


class FakeSlowEngine:
    """An HTTP server that answers every request after ``delay_s`` with a
    valid completion (too late for any sane timeout)."""

    def __init__(self, delay_s: float = 2.0) -> None:
        delay = delay_s

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(delay)
                body = (
                    b'{"choices":[{"text":"x","logprobs":{"tokens":["x"],'
                    b'"token_logprobs":[-0.1],"top_logprobs":[{"x":-0.1}]}}]}'
                )
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeSlowEngine:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- driving a detector (tests/conftest.py's DetectorDriver) ------------------


def _ends(signals: list[tuple[float, object]]) -> list[TurnEndFrame]:
    return [s for _, s in signals if isinstance(s, TurnEndFrame)]


# --- no engine needed --------------------------------------------------------


def test_llm_eou_is_registered_with_defaults():
    det = create_detector("llm-eou", VirtualClock())
    assert isinstance(det, LLMEouDetector)
    assert available()["llm-eou"] is LLMEouDetector
    p = det.params
    assert p.base_url == "http://127.0.0.1:8080/v1"
    assert (p.timeout_ms, p.fallback_ms, p.model) == (300.0, 800.0, "")
    # LiveKit's evidence: 6 messages, ~128 tokens; the threshold is the one
    # calibrated for the default engine's model (SmolLM2-135M-Instruct).
    assert (p.history_turns, p.max_tokens) == (6, 128)
    cal = calibration_for("")
    assert cal is not None and p.threshold == cal.threshold
    eou = getattr(det.scorer, "eou", det.scorer)  # the LLMEndOfTurn behind the detector
    assert eou.count_punct is cal.count_punct
    assert (eou.history_turns, eou.max_tokens) == (6, 128)
    assert eou.system == cal.system == SMOLLM2_SYSTEM


def test_threshold_follows_the_model_unless_given():
    name = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model_key(name) == "smollm2-135m-instruct"
    assert model_key("HuggingFaceTB/SmolLM2-135M-Instruct") == "smollm2-135m-instruct"
    det = create_detector(f"llm-eou:model={name}", VirtualClock())
    assert det.params.threshold == CALIBRATION["smollm2-135m-instruct"].threshold
    det = create_detector("llm-eou:model=some-other-model", VirtualClock())
    assert det.params.threshold == 0.5  # nothing calibrated for it
    det = create_detector(f"llm-eou:model={name},threshold=0.3", VirtualClock())
    assert det.params.threshold == 0.3


def test_llm_eou_spec_errors_are_clear():
    with pytest.raises(DetectorSpecError, match="timeout_ms"):
        create_detector("llm-eou:timeout_ms=0", VirtualClock())
    with pytest.raises(DetectorSpecError, match="min_wait_ms"):
        create_detector("llm-eou:min_wait_ms=900,max_wait_ms=500", VirtualClock())
    with pytest.raises(DetectorSpecError, match="history_turns"):
        create_detector("llm-eou:history_turns=0", VirtualClock())


@pytest.mark.parametrize(
    "template, words",
    [
        ("llama9", "unknown chat template 'llama9'"),
        ("<u>{content}</u>", "needs {role}"),
        ("<|im_start|>{role}\\n{content}\\n<|im_end|>", "must come right after {content}"),
    ],
)
def test_bad_template_is_a_one_line_spec_error(template, words):
    # The CLI prints DetectorSpecError as one line (no traceback).
    eot = ",eot_token=<|im_end|>" if "im_end" in template else ""
    with pytest.raises(DetectorSpecError) as exc:
        create_detector(f"llm-eou:template={template}{eot}", VirtualClock())
    msg = str(exc.value)
    assert "template" in msg and words in msg
    assert "\n" not in msg


def test_normalisation_is_livekits():
    # NFKC, lower case, Unicode punctuation gone except ' and -, spaces collapsed.
    assert normalize_text("Hi! I'd like a TABLE, for two... please?") == (
        "hi i'd like a table for two please"
    )
    assert normalize_text("Well — it's a follow-up «question»:  okay") == (
        "well it's a follow-up question okay"
    )
    assert normalize_text("ﬁve ＡＢＣ") == "five abc"  # NFKC
    assert normalize_text("$5 + 3 = 8 #1") == "$5 + 3 = 8 1"  # symbols stay, '#' is punctuation
    assert normalize_text("...") == ""


def test_messages_are_the_last_six_merged_by_speaker():
    eou = LLMEndOfTurn()
    context = [
        {"role": "assistant", "content": "Luigi's, good evening."},  # dropped: too old
        {"role": "user", "content": "Hi."},  # dropped: 7th message from the end
        {"role": "assistant", "content": "How can I help?"},
        {"role": "user", "content": "A table."},
        {"role": "user", "content": "For tonight."},  # merged with the one before
        {"role": "system", "content": "ignored"},
        {"role": "assistant", "content": "  "},  # empty: dropped before the cut
        {"role": "assistant", "content": "Sure, for how many?"},
        {"role": "user", "content": "For"},  # the caller's earlier words this turn
    ]
    # As LiveKit: the last 6 messages are taken first, then merged.
    msgs = eou.messages("two people", context=context)
    assert msgs == [
        {"role": "assistant", "content": "how can i help"},
        {"role": "user", "content": "a table for tonight"},
        {"role": "assistant", "content": "sure for how many"},
        {"role": "user", "content": "for two people"},
    ]
    # agent_text is shorthand for a one-message context.
    assert eou.messages("Yes.", "Is that right?") == [
        {"role": "assistant", "content": "is that right"},
        {"role": "user", "content": "yes"},
    ]
    assert eou.messages("yes") == [{"role": "user", "content": "yes"}]


def test_chatml_prompt_stops_right_after_the_user_text():
    eou = LLMEndOfTurn()
    prompt = eou.render("  Hello,   there ", "How can I help?")
    # What SmolLM2's own chat template (apply_chat_template, as LiveKit
    # renders) writes for the two messages — its default system message
    # first — with the last message's <|im_end|> cut off (LiveKit's rfind).
    assert prompt == (
        f"<|im_start|>system\n{SMOLLM2_SYSTEM}<|im_end|>\n"
        "<|im_start|>assistant\nhow can i help<|im_end|>\n<|im_start|>user\nhello there"
    )
    # A model without a calibration gets no system message.
    assert LLMEndOfTurn(model="other").render("hi") == "<|im_start|>user\nhi"
    with_system = LLMEndOfTurn(system="Be brief.").render("hi")
    assert with_system == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi"
    assert LLMEndOfTurn(system="", normalize=False).render("Hi, there.") == (
        "<|im_start|>user\nHi, there."
    )


def _long_context(n: int = 11) -> list[dict[str, str]]:
    lines = [
        "Thanks for calling the clinic, this is Dana, how can I help you today?",
        "Hi yes I need to move my appointment from Thursday to some time next week",
        "Of course. Can I have your full name and date of birth to find the booking?",
        "It's Robert Alvarez, March third nineteen seventy eight",
        "Thank you Robert. I see you on Thursday at ten with Doctor Patel. Which day suits?",
        "Tuesday or Wednesday morning would be best for me if there's anything",
    ]
    return [
        {"role": "assistant" if i % 2 == 0 else "user", "content": lines[i % len(lines)]}
        for i in range(n)
    ]


def test_left_truncation_keeps_the_newest_words_within_the_budget():
    eou = LLMEndOfTurn(max_tokens=64)
    context = _long_context()
    msgs = eou.messages("wednesday at nine would be", context=context)
    assert msgs[-1] == {"role": "user", "content": "wednesday at nine would be"}
    assert msgs[-2]["content"] == normalize_text(context[-1]["content"])
    est = sum(5 + estimate_tokens(m["content"]) for m in msgs) - 2
    assert est <= 64
    # The oldest message kept lost its first words, not its last.
    first = msgs[0]["content"]
    assert first and any(normalize_text(m["content"]).endswith(first) for m in context)
    # A caller message longer than the budget keeps its last words.
    words = " ".join(f"w{i}" for i in range(200))
    (only,) = eou.messages(words, context=context)
    assert only["role"] == "user" and only["content"].endswith("w199")
    assert estimate_tokens(only["content"]) <= 64


def test_history_cut_is_stable_while_the_caller_talks():
    # Every decision of a turn shares the history as a prompt prefix (the
    # engine's prefix cache), until the caller's words cross a 32-token step.
    eou = LLMEndOfTurn()
    context = _long_context()
    words = ["i", "think", "tuesday", "would", "work", "best", "for", "me", "if", "doctor", "patel", "has", "something"]
    prompts = [eou.render(" ".join(words[:k]), context=context) for k in range(1, len(words))]
    head = prompts[0].rsplit("<|im_start|>user\n", 1)[0]
    assert all(p.startswith(head + "<|im_start|>user\n") for p in prompts)
    # The prewarm prompt (no words yet) is that same prefix.
    assert eou.render("", context=context) == head + "<|im_start|>user\n"


def test_custom_template_renders_each_message():
    t = resolve_template("<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>")
    assert t.eot_token == "<|eot_id|>"  # taken from after {content}
    msgs = [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "yo"}]
    assert t.render(msgs) == (
        "<|start_header_id|>assistant<|end_header_id|>\n\nhi<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nyo"
    )
    assert CHAT_TEMPLATES["chatml"].overhead() == 5  # <|im_start|> role \n <|im_end|> \n
    with pytest.raises(TemplateError, match="right after"):
        ChatTemplate("<s>{role}: {content}\n</s>", "</s>")
    with pytest.raises(TemplateError, match="unknown chat template"):
        resolve_template("llama9")


@pytest.mark.parametrize(
    "body",
    [
        # OpenAI legacy (vLLM, SGLang)
        {
            "choices": [
                {
                    "text": ".",
                    "logprobs": {
                        "tokens": ["."],
                        "token_logprobs": [-0.5],
                        "top_logprobs": [{".": -0.5, "<|im_end|>": -1.5}],
                    },
                }
            ],
            "usage": {"prompt_tokens": 30, "prompt_tokens_details": {"cached_tokens": 28}},
        },
        # chat-style entries (recent llama-server)
        {
            "choices": [
                {
                    "text": ".",
                    "logprobs": {
                        "content": [
                            {
                                "token": ".",
                                "logprob": -0.5,
                                "top_logprobs": [
                                    {"token": ".", "logprob": -0.5},
                                    {"token": " <|im_end|>", "logprob": -1.5},
                                ],
                            }
                        ]
                    },
                }
            ],
            "usage": {"prompt_tokens": 30},
            "timings": {"cache_n": 28},
        },
        # llama.cpp native
        {
            "completion_probabilities": [
                {
                    "content": ".",
                    "probs": [
                        {"tok_str": ".", "prob": math.exp(-0.5)},
                        {"tok_str": "<|im_end|>", "prob": math.exp(-1.5)},
                    ],
                }
            ],
            "usage": {"prompt_tokens": 30, "prompt_tokens_details": {"cached_tokens": 28}},
        },
    ],
    ids=["legacy", "content", "native"],
)
def test_logprob_shapes_normalise_alike(body):
    nxt = parse_completion(body)
    assert next(iter(nxt.top)) == "."
    assert nxt.cached_tokens == 28
    res = LLMEndOfTurn()._result(nxt)
    assert res.found
    assert res.p_eot == pytest.approx(math.exp(-1.5))
    assert res.p_punct == pytest.approx(math.exp(-0.5))
    assert res.probability == pytest.approx(math.exp(-1.5) + math.exp(-0.5))
    assert res.top_token == "."


def test_missing_end_token_scores_zero_with_an_upper_bound():
    body = {"choices": [{"logprobs": {"top_logprobs": [{" two": -0.2, " four": -2.0}]}}]}
    res = LLMEndOfTurn()._result(parse_completion(body))
    assert not res.found
    assert res.probability == 0.0
    assert res.upper_bound == pytest.approx(math.exp(-2.0))
    body["choices"][0]["logprobs"]["top_logprobs"][0]["?"] = -1.0
    res = LLMEndOfTurn()._result(parse_completion(body))
    assert (res.p_eot, res.p_punct) == (0.0, pytest.approx(math.exp(-1.0)))


def test_a_body_without_logprobs_is_an_engine_error():
    with pytest.raises(EngineError) as exc:
        parse_completion({"choices": [{"text": "x"}]})
    assert exc.value.kind == "protocol"


async def test_timeout_falls_back_on_silence_and_is_counted():
    # The engine answers after 30 s: a detector that waited for it (instead
    # of its 100 ms timeout) would take 30 s, whatever the machine's load.
    with FakeSlowEngine(delay_s=30.0) as fake:
        clock = VirtualClock()
        det = create_detector(f"llm-eou:base_url={fake.base_url},timeout_ms=100", clock)
        assert isinstance(det, LLMEouDetector)
        d = DetectorDriver(det)
        await d.speak(1.0, COMPLETE)
        t0 = time.perf_counter()
        out = await d.silence(0.5)  # asks on the first silent frame: times out
        assert time.perf_counter() - t0 < 20
        assert not _ends(out)  # the fallback waits for fallback_ms of silence
        assert det.engine_errors == 1
        out = await d.silence(0.5)
        (end,) = _ends(out)
        assert end.reason.startswith("fallback: timeout")
        assert end.probability is None
        assert 800 <= (end.at - d.vad.speech_end) * 1000 < 800 + FRAME_S * 1000 + 1e-6
        assert det.fallbacks == 1
        # Next turn: the engine is asked again (and fails again).
        await d.speak(1.0, "and a high chair")
        out = await d.silence(1.0)
        assert len(_ends(out)) == 1
        assert (det.fallbacks, det.engine_errors, det.requests) == (2, 2, 2)


@pytest.mark.parametrize("compute", ["fixed", "none"])
async def test_a_replay_charging_a_fixed_cost_waits_for_a_slow_engine(compute):
    # --compute fixed charges each ask its recorded cost, so this machine's
    # load (a slow answer: here 0.4 s against a 100 ms timeout) must not turn
    # the engine's verdict into a fallback: two runs must agree. The same
    # detector under "measured" (the live rule) falls back, as the test above.
    with FakeSlowEngine(delay_s=0.4) as fake:
        det = create_detector(f"llm-eou:base_url={fake.base_url},timeout_ms=100", VirtualClock())
        assert isinstance(det, LLMEouDetector)
        det.set_compute(compute)
        d = DetectorDriver(det)
        await d.speak(1.0, COMPLETE)
        out = await d.silence(1.5)
        (end,) = _ends(out)
        assert not end.reason.startswith("fallback"), end.reason
        assert end.probability is not None
        assert (det.engine_errors, det.fallbacks, det.requests) == (0, 0, 1)
        det.set_compute("measured")
        await d.speak(1.0, "and a high chair")
        out = await d.silence(1.5)
        (end,) = _ends(out)
        assert end.reason.startswith("fallback: timeout")


async def test_fused_llm_evidence_waits_for_a_slow_engine_under_a_fixed_cost():
    with FakeSlowEngine(delay_s=0.4) as fake:
        spec = f"fused:audio=off,text=off,llm=on,base_url={fake.base_url},llm_timeout_ms=100"
        det = create_detector(spec, VirtualClock())
        det.set_compute("fixed")
        d = DetectorDriver(det)
        await d.speak(1.0, COMPLETE)
        (end,) = _ends(await d.silence(1.5))
        assert "p_llm" in end.reason, end.reason  # the engine's answer was used
        det.set_compute("measured")
        await d.speak(1.0, "and a high chair")
        (end,) = _ends(await d.silence(1.5))
        assert "p_llm" not in end.reason, end.reason  # timed out: no llm evidence


async def test_engine_down_falls_back(caplog):
    clock = VirtualClock()
    det = create_detector(f"llm-eou:base_url=http://127.0.0.1:{closed_port()}/v1", clock)
    d = DetectorDriver(det)
    with caplog.at_level("WARNING", logger="turnkit.detectors.llm_eou"):
        await d.speak(1.0, COMPLETE)
        (end,) = _ends(await d.silence(1.0))
        assert end.reason.startswith("fallback: connect")
        assert det.fallbacks == 1
        await d.speak(1.0, "and a high chair")
        assert len(_ends(await d.silence(1.0))) == 1
    assert det.fallbacks == 2
    # Said once, with the engine's address, not once per turn.
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "127.0.0.1" in warnings[0].getMessage()


async def test_direct_engine_errors_raise_engine_error():
    eou = LLMEndOfTurn(f"http://127.0.0.1:{closed_port()}/v1", timeout_ms=200)
    with pytest.raises(EngineError) as exc:
        await eou.predict("hello")
    assert exc.value.kind == "connect"
    with pytest.raises(EngineError):
        eou.predict_sync("hello")
    await eou.aclose()


async def test_no_words_waits_for_max_wait_without_asking():
    clock = VirtualClock()
    det = create_detector(f"llm-eou:base_url=http://127.0.0.1:{closed_port()}/v1", clock)
    d = DetectorDriver(det)
    await d.speak(20 * FRAME_S)  # speech but no transcript (a cough)
    (end,) = _ends(await d.silence(2.0))
    assert end.reason.startswith("no transcript")
    assert det.requests == 0


# --- the real engine -----------------------------------------------------------


async def test_end_token_is_found_by_id_though_rendered_empty(engine):
    # llama-server renders <|im_end|> as "" in top_logprobs: found by its id,
    # learnt once from /tokenize. After a finished sentence it is in the top
    # 100 (rank ~21 for this one with SmolLM2-135M).
    eou = LLMEndOfTurn(engine, timeout_ms=10_000, top_k=100)
    res = await eou.score("that sounds great thank you", AGENT)
    assert eou.eot_id is not None
    assert res.found
    assert 0.0 < res.p_eot < 1.0
    assert res.probability == pytest.approx(min(1.0, res.p_eot + res.p_punct))
    strict = LLMEndOfTurn(engine, timeout_ms=10_000, top_k=100, count_punct=False)
    assert (await strict.predict("that sounds great thank you", AGENT)) == pytest.approx(
        res.p_eot, rel=1e-3
    )
    await eou.aclose()
    await strict.aclose()


async def test_complete_sentence_scores_higher_than_its_cut_prefix(engine):
    # Measured: 0.76 against 0.00 with AGENT. Only a wide margin is asserted.
    eou = LLMEndOfTurn(engine, timeout_ms=10_000)
    for agent in (AGENT, ""):
        p_complete = await eou.predict(COMPLETE, agent)
        p_cut = await eou.predict(CUT, agent)
        assert p_complete > p_cut + 0.2, (agent, p_complete, p_cut)
    await eou.aclose()


def test_sync_wrapper_matches_async(engine):
    import asyncio

    eou = LLMEndOfTurn(engine, timeout_ms=10_000)
    p_sync = eou.predict_sync(COMPLETE, AGENT)
    p_async = asyncio.run(eou.predict(COMPLETE, AGENT))
    assert p_sync == pytest.approx(p_async, abs=1e-3)
    eou.close()


async def test_repeated_prefix_reports_cached_tokens(engine):
    eou = LLMEndOfTurn(engine, timeout_ms=10_000)
    first = await eou.score("what time do you open on sunday", AGENT)
    second = await eou.score("what time do you close on sunday", AGENT)
    assert second.cached_tokens is not None
    assert second.prompt_tokens is not None
    assert 0 < second.cached_tokens < second.prompt_tokens
    assert first.prompt_tokens == second.prompt_tokens
    await eou.aclose()


def test_prompt_fits_the_token_budget_by_the_real_tokenizer(engine):
    # The estimate (no tokenizer here) against SmolLM2's own tokenizer
    # (llama-server's /tokenize on the exact prompt string).
    import httpx

    eou = LLMEndOfTurn(engine, system="", timeout_ms=10_000)  # the budget leaves out system
    context = _long_context()
    for words in ("tuesday", "i think tuesday at nine would work if doctor patel is in"):
        prompt = eou.render(words, context=context)
        assert prompt.endswith("<|im_start|>user\n" + words)
        body = {"content": prompt, "add_special": False, "parse_special": True}
        toks = httpx.post(engine.removesuffix("/v1") + "/tokenize", json=body).json()["tokens"]
        assert toks[0] == 1  # <|im_start|>: the cut kept whole messages' headers
        assert 2 not in toks[-len(words.split()) :]  # no <|im_end|> after the caller's words
        assert 80 <= len(toks) <= 128, len(toks)  # ~128: the budget, and most of it used
    eou.close()


async def test_history_is_cached_for_every_decision_of_a_turn(engine):
    eou = LLMEndOfTurn(engine, timeout_ms=10_000)
    context = _long_context()
    assert await eou.prewarm(context=context)
    history = eou.render("", context=context)
    first = await eou.score("tuesday", context=context)
    second = await eou.score("tuesday at nine would", context=context)
    for r in (first, second):
        assert r.cached_tokens is not None and r.prompt_tokens is not None
        # All but the caller's words (a few tokens) came from the prefix cache.
        assert r.cached_tokens >= r.prompt_tokens - 6, (r.cached_tokens, r.prompt_tokens)
    assert second.prompt_tokens > first.prompt_tokens
    assert len(history) < len(eou.render("tuesday", context=context))
    await eou.aclose()


async def test_context_changes_the_verdict(engine):
    # "for two" closes an answer to "for how many?"; after a greeting it does not.
    eou = LLMEndOfTurn(engine, timeout_ms=10_000)
    asked = [
        {"role": "assistant", "content": "Luigi's, how can I help?"},
        {"role": "user", "content": "I'd like to book a table for tonight."},
        {"role": "assistant", "content": "Sure. For how many people?"},
    ]
    greeted = asked[:1]
    # Measured (SmolLM2-135M Q4_1): 0.009 after the question, 0.0 (not in the
    # top 20) after the greeting and for the cut "for two people at".
    p_answer = await eou.predict("for two", context=asked)
    assert p_answer > await eou.predict("for two", context=greeted)
    assert p_answer > await eou.predict("for two people at", context=asked)
    await eou.aclose()


async def test_detector_ends_turns_through_the_engine(engine):
    clock = VirtualClock()
    det = create_detector(f"llm-eou:base_url={engine},timeout_ms=10000,max_wait_ms=1500", clock)
    det.set_agent_text(AGENT)
    d = DetectorDriver(det)
    await d.speak(1.0, CUT)
    out = await d.silence(0.3)
    await d.speak(1.0, COMPLETE)  # the caller goes on: any pending pause is void
    out += await d.silence(2.0)
    ends = _ends(out)
    assert len(ends) == 1
    assert ends[0].probability is not None
    assert ends[0].reason.startswith("p=")
    assert det.fallbacks == 0
    assert det.requests == 2
    assert not [s for _, s in out if isinstance(s, TurnResumedFrame)]


async def test_replay_through_the_engine_has_compute_ms(engine):
    from turnkit.replay.recording import load_recording
    from turnkit.replay.simulator import ReplayConfig, replay_call

    rec = load_recording(ROOT / "recordings" / "easy-short-08")
    # SmolLM2-135M gives this call's turns P(end) 0.01-0.3; a low threshold
    # makes decisions right after a request, which the replay then charges
    # with its wall-clock cost (a decision on a later timer owes nothing;
    # so does one a draft out held: no drafts here).
    spec = f"llm-eou:base_url={engine},timeout_ms=10000,threshold=0.02"
    score = await replay_call(rec, spec, ReplayConfig(eager=False))
    assert score.decisions > 0
    assert any(ms > 0 for ms in score.compute_ms), score.compute_ms


async def test_replay_counts_fallback_decisions_when_the_engine_is_down():
    from turnkit.replay.metrics import aggregate
    from turnkit.replay.recording import load_recording
    from turnkit.replay.simulator import ReplayConfig, replay_call

    spec = f"llm-eou:base_url=http://127.0.0.1:{closed_port()}/v1,timeout_ms=200"
    rec = load_recording(Path(__file__).resolve().parent.parent / "recordings" / "easy-short-08")
    res = aggregate(spec, [await replay_call(rec, spec, ReplayConfig())])
    assert res["decisions"] > 0
    assert res["fallback_decisions"] == res["decisions"]


def test_eot_score_works_with_llm_eou(engine, tmp_path):
    import json
    import subprocess
    import sys

    lines = tmp_path / "in.jsonl"
    lines.write_text(
        json.dumps({"text": "i'd like to book a table for two please"})
        + "\n"
        + json.dumps({"text": "i'd like to book a table for"})
        + "\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnkit.cli",
            "eot-score",
            "--detector",
            f"llm-eou:base_url={engine},timeout_ms=20000",
            str(lines),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    done, cut = (json.loads(x) for x in proc.stdout.splitlines())
    assert done["p_end"] > cut["p_end"]
    assert set(done) == {"p_end", "end"}
