"""turnkit's turn decisions as Pipecat 1.x user turn strategies.

* :class:`TurnkitUserTurnStopStrategy` — the **end of the turn**: a turnkit
  end-of-turn detector (``fused``, ``smart-turn``, ``semantic-text``,
  ``llm-eou``, ``silence``) decides when the caller is done. With an
  :class:`~turnkit.drafting.EagerDrafter`, the detector's eager signals start
  a *speculative* inference through Pipecat's own speculation path (the LLM
  service's SpeculationGate holds the tokens); the confirmed end keeps it if
  the words did not change, else withdraws it and asks for a fresh one.
* :class:`TurnkitUserTurnStartStrategy` — the **start of a turn**, which in
  Pipecat 1.x is where an interruption is decided: caller speech confirmed by
  turnkit's VAD starts a turn when the bot is silent; while the bot speaks,
  turnkit's :class:`~turnkit.barge_in.controller.BargeInController` decides
  whether the sound takes the floor, and the strategy executes its actions
  (``stop``/``confirm``: Pipecat's interruption; ``pause``/``resume``: Pipecat
  1.x has no supported way to hold the bot's audio and play on, so the bot
  talks through a pause and the interruption comes at the confirm; the
  difference from ``turnkit replay``, which holds, is that later stop).

Both share one :class:`~turnkit_pipecat.engine.TurnkitTurnEngine`, so each
caller frame is analysed once.

Example::

    engine = TurnkitTurnEngine("fused")
    # held for the LLM's first token (FirstTokenObserver(drafter) on the task)
    drafter = EagerDrafter(engine.clock, DraftParams(learn_first_token=True))
    user_agg, assistant_agg = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(
                start=[TurnkitUserTurnStartStrategy(engine)],
                stop=[TurnkitUserTurnStopStrategy(engine, drafter=drafter)],
            )
        ),
    )
"""

from __future__ import annotations

import logging

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EagerEndOfTurnCancelFrame,
    Frame,
    FunctionCallCancelFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InputAudioRawFrame,
    StartFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_start import BaseUserTurnStartStrategy
from pipecat.turns.user_stop import BaseUserTurnStopStrategy
from turnkit.barge_in.controller import Action, BargeInController
from turnkit.drafting.drafter import EagerDrafter
from turnkit.frames import TurnEagerFrame, TurnEndFrame, TurnResumedFrame

from turnkit_pipecat.engine import TurnkitTurnEngine
from turnkit_pipecat.tools import GatedFunctions

__all__ = ["TurnkitUserTurnStartStrategy", "TurnkitUserTurnStopStrategy"]

log = logging.getLogger(__name__)


class TurnkitUserTurnStartStrategy(BaseUserTurnStartStrategy):
    """Starts a user turn when turnkit's VAD confirms caller speech; while
    the bot speaks, only when the barge-in controller's action says the
    sound takes the floor (then Pipecat broadcasts the interruption).

    ``barge_in`` defaults to turnkit's
    :class:`~turnkit.barge_in.controller.BargeInController` with its filters
    ("uh-huh" and the bot's own words coming back do not take the floor);
    ``BargeInController.raw_vad(engine.clock)`` is Pipecat's usual
    any-speech-interrupts. It sees every caller frame (after the engine's
    echo filter, if any), every transcript, and the bot's playback
    (``BotStarted/StoppedSpeakingFrame``, spoken words from
    :class:`~turnkit_pipecat.echo.EchoReferenceTap`). The strategy decides
    nothing: ``stop`` and ``confirm`` interrupt; ``pause`` and ``resume`` are
    counted (``held``, ``resumed``) but not executable in Pipecat 1.x. Over a
    reply on its way (a turn committed, the bot not speaking yet), a sound
    starts a user turn — which drops that reply — only when the controller
    takes it for the caller's voice (``callers_voice``: not a voice far
    under the line; counted in ``background``).

    A caller turn the bot talked through (its end kept by the stop strategy
    in the engine's :class:`~turnkit.drafting.owed.OwedTurn`) becomes a user
    turn when the bot stops, if that rule says it is owed an answer ("Okay"
    over the bot's closing words, then silence; counted in
    ``owed_answered``); a detector end that finds no user turn with the
    bot silent (a turn begun under the bot's audio) starts one, so that the
    stop strategy's end is answered — among them the detector's end on
    words of a turn it had ended before they came (a segmented STT past
    its p99, :attr:`~turnkit.frames.TurnEndFrame.late_words`: counted in
    ``late_answered``). Such a turn starts at the detector's eager signal
    when one comes first (counted in ``eager_started``), so that a
    drafter's speculation runs inside it and the end finds the reply on
    its way."""

    def __init__(
        self,
        engine: TurnkitTurnEngine,
        *,
        barge_in: BargeInController | None = None,
        vad_frames: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.engine = engine
        # Pipecat 1.x runs its VAD inside the user aggregator and broadcasts
        # its edges; with turnkit's VAD in its place, a segmented STT
        # (Whisper: OpenAISTTService) needs them: ``vad_frames=True``. Off by
        # default because Pipecat then also holds a turn end while that VAD
        # reports speech (a breath after the words), where the turnkit
        # detector has already decided (the stop goes out once the VAD stops).
        self.vad_frames = vad_frames
        self.barge_in: BargeInController = (
            barge_in if barge_in is not None else BargeInController(engine.clock)
        )
        self.interruptions = 0
        self.late_answered = 0  # turns ended before their last words, answered on them
        self.eager_started = 0  # turns begun under the bot, started at the eager signal
        self.ignored = 0  # speech onsets the controller let the bot talk through
        self.held = 0  # pause actions (the bot talked on: Pipecat cannot hold)
        self.resumed = 0
        self.actions: list[tuple[float, Action]] = []  # every non-keep action
        # A turn committed and the bot not speaking yet: its reply is on the
        # way (Pipecat drops it when a user turn starts).
        self.reply_pending = False
        self.background = 0  # onsets over a pending reply judged not the caller's
        self._unstarted = False  # such a sound goes on
        self.owed_answered = 0  # turns the bot talked through, answered once it stopped
        self.murmurs_dropped = 0  # ... not owed: their words dropped from the aggregation
        self._cut = False  # this reply was interrupted (its stop is not its end)
        # Function calls the conversation waits on (Pipecat broadcasts their
        # frames): the bot falling silent meanwhile is not its reply's end.
        self._tool_calls: set[str] = set()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        step = await self.engine.feed(frame)
        ctl = self.barge_in
        if isinstance(frame, FunctionCallInProgressFrame) and frame.cancel_on_interruption:
            self._tool_calls.add(frame.tool_call_id)
        elif isinstance(frame, FunctionCallResultFrame | FunctionCallCancelFrame):
            self._tool_calls.discard(frame.tool_call_id)
        if isinstance(frame, BotStartedSpeakingFrame):
            self.reply_pending = False
            self._cut = False
            ctl.on_agent_started(self.engine.bot_words or self.engine.agent_text, self.engine.now)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            ctl.on_agent_stopped(self.engine.now, completed=not self._cut)
            await self._answer_owed()
        # A commit while a held bid waits for its words confirms it (Pipecat
        # cannot hold the bot's audio: the bot talked on, and stops now).
        end = next((s for s in step.signals if isinstance(s, TurnEndFrame)), None)
        if end is not None and await self._execute(ctl.on_turn_end(end.through_sound)):
            return ProcessFrameResult.CONTINUE
        if end is not None and not self.engine.bot_speaking:
            if not self.engine.user_turn:
                # A caller turn Pipecat never saw begin (it began under the
                # bot's audio, which stopped before the turn ended), or the
                # detector's end on words that came after it had ended their
                # turn (``late_words``: a segmented STT slower than its p99,
                # Whisper's 1.6 s on a busy machine; Pipecat asked no LLM
                # for the empty turn, or one for the words before them):
                # start it, so the stop strategy's end on this frame is
                # answered (a reply on its way is dropped, as when the
                # caller goes on).
                self.late_answered += end.late_words
                await self.trigger_user_turn_started()
            self.reply_pending = True
        elif (
            any(isinstance(s, TurnEagerFrame) for s in step.signals)
            and not self.engine.user_turn
            and not self.engine.bot_speaking
            and not self.reply_pending
        ):
            # The detector thinks a caller turn Pipecat never saw begin (it
            # began under the bot's audio, which has stopped) may be ending:
            # start it now rather than at the end, so a drafter's
            # speculation runs inside it and the end finds the reply on its
            # way (the end would start it anyway; a resume leaves it on for
            # the detector's next end). Not over a reply on its way: the
            # end of a turn already answered comes first.
            self.eager_started += 1
            await self.trigger_user_turn_started()
        if any(isinstance(s, TurnResumedFrame) for s in step.signals):
            # The detector says the caller went on. After a turn it ended
            # through a sound it takes for not the caller's (words stopped
            # under a television), only that says so: the reply on its way
            # is stale, whatever the sound's level (as the replay's agent
            # cancels it on the controller's word).
            through = ctl.through_sound
            ctl.on_turn_resumed()
            if through and self.reply_pending and not self.engine.bot_speaking:
                self._unstarted = False
                await self.trigger_user_turn_started()
                return ProcessFrameResult.CONTINUE
        # Words decide a barge-in too ("wait" is a bid, "uh-huh" is not).
        words = step.transcript
        if words is not None and await self._execute(ctl.on_transcript(words.text)):
            return ProcessFrameResult.CONTINUE
        if not isinstance(frame, InputAudioRawFrame):
            return ProcessFrameResult.CONTINUE
        for af in step.audio:
            vad = af.vad
            assert vad is not None
            if self.vad_frames and vad.started:
                p = self.engine.vad.params
                await self.broadcast_frame(VADUserStartedSpeakingFrame, start_secs=p.start_ms / 1000)
            if self.vad_frames and vad.stopped:
                p = self.engine.vad.params
                await self.broadcast_frame(VADUserStoppedSpeakingFrame, stop_secs=p.stop_ms / 1000)
            talking = self.engine.bot_speaking
            act = ctl.on_frame(vad, af.audio)
            if talking:
                if await self._execute(act):
                    return ProcessFrameResult.CONTINUE
                if vad.started and act is Action.KEEP:
                    self.ignored += 1
            elif vad.started or (self._unstarted and vad.speaking):
                if self.reply_pending and not ctl.callers_voice():
                    # Over a reply on its way, a sound the controller does
                    # not take for the caller (a voice far under the line)
                    # starts no user turn, which would drop the reply; its
                    # next frames may still show the caller.
                    self.background += vad.started
                    self._unstarted = True
                    continue
                self._unstarted = False
                await self.trigger_user_turn_started()
                return ProcessFrameResult.CONTINUE
            else:
                self._unstarted = False
        return ProcessFrameResult.CONTINUE

    async def _execute(self, act: Action) -> bool:
        """Carry out one controller action; True when it interrupted the bot."""
        if act is Action.KEEP:
            return False
        self.actions.append((self.engine.now, act))
        if act in (Action.STOP, Action.CONFIRM) and self.engine.bot_speaking:
            await self._interrupt()
            return True
        if act is Action.PAUSE:
            self.held += 1
        elif act is Action.RESUME:
            self.resumed += 1
        return False

    async def _interrupt(self) -> None:
        self.interruptions += 1
        self._cut = True
        await self.trigger_user_turn_started()

    async def _answer_owed(self) -> None:
        """The bot stopped: a caller turn it talked through, if owed an
        answer now (:class:`~turnkit.drafting.owed.OwedTurn`: "Okay" said
        over its closing words, then silence), becomes a user turn — started
        here, ended by :class:`TurnkitUserTurnStopStrategy` on this same
        frame — so Pipecat's LLM answers it; otherwise the caller would wait
        in silence until they spoke again."""
        if self._tool_calls or self.engine.reply_streaming:
            # The bot fell silent for a function call ("let me check that")
            # or a slow LLM mid-reply (a ReplyTextTap tells): its reply is
            # not over, and the kept turn waits for the reply's end.
            return
        kept = self.engine.owed.kept
        owed = self.engine.owed.take(completed=not self._cut)
        if self.engine.user_turn:
            return
        if owed is None:
            if kept is not None and not self._cut:
                # A murmur the bot talked through ("uh-huh" mid-reply), not
                # owed: its words are no turn, and must not open the
                # caller's next one (turnkit replay and LiveKit drop them
                # too). No caller speech since it, so nothing else is lost.
                self.murmurs_dropped += 1
                await self.trigger_reset_aggregation()
            return
        self.owed_answered += 1
        self.engine.answer_owed = owed
        await self.trigger_user_turn_started()

    async def handle_user_turn_started(self) -> None:
        self.engine.user_turn = True
        self._tool_calls.clear()  # a user turn interrupts the calls it waited on
        self.engine.new_turn()
        self.reply_pending = False
        self.barge_in.reset()
        if self.engine.bot_speaking:
            # The controller's segment bookkeeping starts over with the bot
            # still talking (the interruption stops it; BotStopped follows).
            self.barge_in.on_agent_started(
                self.engine.bot_words or self.engine.agent_text, self.engine.now
            )

    async def handle_user_turn_stopped(self) -> None:
        self.engine.user_turn = False


class TurnkitUserTurnStopStrategy(BaseUserTurnStopStrategy):
    """Ends the user turn when the turnkit detector commits.

    Evidence: every caller frame with the VAD verdict, the transcripts, and
    the bot's last words as context for text detectors. With ``drafter``,
    eager signals run speculative inference that the end keeps or withdraws;
    a drafter given its engine's first-token time
    (``EagerDrafter(clock, DraftParams(first_token_ms=...))``, or
    ``learn_first_token=True`` with a
    :class:`~turnkit_pipecat.first_token.FirstTokenObserver` on the task)
    also holds each end until the speculation's first token could be there
    (an end sooner brings the reply no sooner, and cuts off a caller who
    goes on).
    With ``functions``, the tool gate follows the same drafts and turns.
    An end while the bot speaks with no user turn on (the start strategy let
    the bot talk through that speech) is kept in the engine's
    :class:`~turnkit.drafting.owed.OwedTurn` (``ignored``), not stopped: the
    start strategy answers it when the bot stops, if owed, and this strategy
    ends that turn on the same frame.
    """

    def __init__(
        self,
        engine: TurnkitTurnEngine,
        *,
        drafter: EagerDrafter | None = None,
        context: LLMContext | None = None,
        functions: GatedFunctions | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.engine = engine
        self.drafter = drafter
        if drafter is not None:
            # With its first_token_ms set, the detector's commits wait for a
            # speculation's first token (and draft a commit that is due
            # first). No drafter leaves the engine's as it is: a host that
            # drafts elsewhere (the replay's Responder) attaches its own.
            engine.detector.attach_drafter(drafter)
        self.context = context
        self.functions = functions
        self._speculation: UserTurnSpeculation | None = None
        self._stopped = False
        self._retry: bool | None = None  # a stop Pipecat ignored (confirms speculation?)
        self.ignored = 0  # ends the bot talked through (kept: turnkit's OwedTurn)
        self.speculations = 0  # speculative inferences started
        self.kept = 0  # ... released by the confirmed end (words unchanged)
        self.withdrawn = 0  # ... withdrawn (words changed, or Pipecat withdrew it)
        self.late_words = 0  # user turns begun on late words, ended on them
        self._started_here = False  # a user turn began on the frame in hand

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        if isinstance(frame, StartFrame):
            self.engine.reset()
        elif isinstance(frame, EagerEndOfTurnCancelFrame) and self._speculation is not None:
            # The LLM service withdrew the speculation itself (it wanted a
            # tool): the end must run a fresh inference. The draft stays, so
            # the gate can still confirm its prefetched reads.
            self._speculation = None
            self.withdrawn += 1
        step = await self.engine.feed(frame)
        if step.speech_started:
            self.engine.owed.caller_spoke()
        edge = step.speech_edge
        if edge is not None and self.functions is not None:
            # A write held after the commit waits while the caller speaks.
            self.functions.caller_speech(edge)
        if isinstance(frame, BotStoppedSpeakingFrame) and self.engine.answer_owed is not None:
            # The start strategy began the turn the bot talked through: end
            # it now, so Pipecat's LLM answers its words.
            self.engine.answer_owed = None
            if self.functions is not None:
                self.functions.begin_turn()
            await self._stop(confirms=False)
        if self._retry is not None:
            if step.speech_started:
                self._retry = None  # the caller went on: the detector decides again
            else:
                await self._stop(confirms=self._retry)
        if self.drafter is not None:
            if step.speech_started:
                # Sound alone leaves the speculation: it answers the words
                # said until the recogniser writes others (below).
                self.drafter.on_speech()
            elif step.signals == [] and step.audio == [] and self.engine.turn_transcript:
                await self._withdraw(self.drafter.on_transcript(self.engine.turn_transcript) is not None)
        started_here, self._started_here = self._started_here, False
        for s in step.signals:
            if isinstance(s, TurnEndFrame):
                if self.engine.bot_speaking and not self.engine.user_turn:
                    await self._ignored(s)
                else:
                    await self._end()
            elif isinstance(s, TurnEagerFrame):
                await self._eager()
            elif isinstance(s, TurnResumedFrame):
                self.engine.owed.caller_spoke()
                if self.drafter is not None:
                    self.drafter.on_speech()
        ended = any(isinstance(s, TurnEndFrame) for s in step.signals)
        if started_here and not ended and self.engine.user_turn and self.engine.late_final(frame):
            # A user turn started on a final transcript of speech the
            # detector has already ended, read as a bid over the bot, that
            # the detector did not end again itself (a streaming STT's late
            # final; a segmented STT's words come with the detector's
            # ``late_words`` end): no speech is coming for the detector to
            # end it on, and Pipecat's stop timeout (5 s) would answer it.
            self.late_words += 1
            self.engine.commit_words()
            await self._end()
        return ProcessFrameResult.CONTINUE

    def set_agent_text(self, text: str) -> None:
        """The bot's last reply (context for text detectors)."""
        self.engine.set_agent_text(text)

    async def _eager(self) -> None:
        if self.drafter is None or not self.engine.user_turn:
            # No user turn on (the caller began under the bot's audio and
            # the bot still talks, or no start strategy of turnkit's runs to
            # start one at this signal): Pipecat runs no speculative
            # inference outside a user turn, and the end would confirm a
            # response that was never asked for, leaving the caller
            # unanswered. The end asks for a fresh one.
            return
        draft = self.drafter.on_eager(self.engine.turn_transcript)
        if draft is None:
            return
        if self._speculation is not None:
            self.withdrawn += 1
            await self.trigger_user_turn_speculation_cancelled()
        if self.functions is not None:
            self.functions.start_draft(draft.id)
        self._speculation = UserTurnSpeculation(text=self.engine.turn_transcript)
        self.speculations += 1
        await self.trigger_user_turn_inference_triggered(speculation=self._speculation)

    async def _withdraw(self, cancelled: bool) -> None:
        if cancelled and self.functions is not None:
            self.functions.discard_draft()
        if cancelled and self._speculation is not None:
            self._speculation = None
            self.withdrawn += 1
            await self.trigger_user_turn_speculation_cancelled()

    async def _ignored(self, end: TurnEndFrame) -> None:
        """The detector ended a caller turn the bot talked through (no user
        turn started for it: an acknowledgement, or the bot's own echo): not
        a turn now, but kept, and answered if owed once the bot stops (see
        :meth:`TurnkitUserTurnStartStrategy._answer_owed`)."""
        self.ignored += 1
        self.engine.owed.ignored(self.engine.committed_text, end.speech_end)
        if self.drafter is not None:
            await self._withdraw(self.drafter.on_ignored() is not None)

    async def _end(self) -> None:
        if self.drafter is not None:
            # The words the commit ended the turn on (the engine's transcript
            # since the commit before it is empty by now).
            action, _draft = self.drafter.on_end(self.engine.committed_text)
            speculation, self._speculation = self._speculation, None
            if self.functions is not None:
                if action == "use":
                    self.functions.confirm_draft()
                else:
                    self.functions.begin_turn()
            if action == "use" and speculation is not None:
                # The held response answers exactly these words: release it.
                self.kept += 1
                await self._stop(confirms=True)
                return
            if speculation is not None:
                self.withdrawn += 1
                await self.trigger_user_turn_speculation_cancelled()
        elif self.functions is not None:
            self.functions.begin_turn()
        await self._stop(confirms=False)

    async def _stop(self, *, confirms: bool) -> None:
        # Pipecat ignores a stop while its controller still thinks the user
        # speaks: with the start strategy's VAD frames, the edge that clears
        # that is queued behind this very frame. Then the stop is retried
        # on the next frame (after the controller has seen the edge).
        self._stopped = False
        if confirms:
            await self.trigger_user_turn_finalized(confirms_speculation=True)
        else:
            await self.trigger_user_turn_stopped()
        self._retry = None if self._stopped else confirms

    async def handle_user_turn_started(self) -> None:
        self.engine.user_turn = True
        # The start strategies see each frame first: a turn they begin now
        # began on the frame this strategy is about to see.
        self._started_here = True
        if self.functions is not None:
            # A new caller turn interrupts the reply to the last one: its
            # reads stop, running writes finish (the gate shields them).
            self.functions.interrupt()
        # What the bot said last is the context for the caller's answer
        # ("what's your card number?" makes "four one" likely unfinished).
        # Pipecat's context has a reply once it has played: a ReplyTextTap,
        # if there is one, handed it as it began.
        if self.context is not None and not self.engine.reply_text_tapped:
            for msg in reversed(self.context.get_messages()):
                if isinstance(msg, dict) and msg.get("role") == "assistant":
                    content = msg.get("content")
                    if isinstance(content, str):
                        self.engine.set_agent_text(content)
                    break

    async def handle_user_turn_stopped(self) -> None:
        self.engine.user_turn = False
        self._stopped = True
        self._retry = None
        if self._speculation is not None:
            # The turn ended some other way (timeout, interruption): nothing
            # else will withdraw the held response.
            self._speculation = None
            await self.trigger_user_turn_speculation_cancelled()
