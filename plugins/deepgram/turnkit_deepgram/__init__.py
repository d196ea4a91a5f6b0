"""turnkit behind Deepgram Flux.

Flux's turn events become turnkit turn frames (:class:`FluxTurnMapper`), so
turnkit's reply path — the :class:`~turnkit.drafting.Responder` with eager
drafting, tool gating, fillers and history (:class:`DraftingHost` hosts it)
— runs behind Flux; recorded Flux streams replay offline (:func:`replay_flux`).

Example::

    from turnkit_deepgram import DraftingHost, FluxThresholds, FluxTurnMapper

    th = FluxThresholds(eot_threshold=0.8, eager_eot_threshold=0.5)
    mapper = FluxTurnMapper(clock)
    host = DraftingHost(clock, ChatClient(url), emit=speak, gate=gate)
    async for message in socket:                       # client.listen.v2.connect(**th.connect_params())
        for frame in mapper.map(message):
            await host.handle(frame)
"""

from turnkit_deepgram.flux import DETECTOR, FluxThresholds, FluxTurnMapper
from turnkit_deepgram.host import DraftingHost, HostTurn
from turnkit_deepgram.replay import FluxReplayResult, StandInEngine, load_flux_jsonl, replay_flux

__all__ = [
    "DETECTOR",
    "DraftingHost",
    "FluxReplayResult",
    "FluxThresholds",
    "FluxTurnMapper",
    "HostTurn",
    "StandInEngine",
    "load_flux_jsonl",
    "replay_flux",
]
