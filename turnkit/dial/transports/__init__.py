"""Transports for ``turnkit dial``; each module imports its framework itself
and is loaded only when named (see :data:`turnkit.dial.transport.TRANSPORTS`)."""
