"""A wide-area round trip on loopback: a TCP proxy that holds every piece of data for half
of ``rtt`` in each direction, so a request and its answer cost one ``rtt`` more, as across
an ocean. Bandwidth is not limited: pieces are forwarded in order at their arrival time
plus the delay, several in flight at once.

Runs in a thread of the calling process (asyncio), for the ``with`` block; nothing is
installed and no privilege is needed (``tc netem`` would need both).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PIECE = 256 * 1024


@dataclass
class DelayProxy:
    port: int
    rtt_s: float


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def forward() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    sender = asyncio.ensure_future(forward())
    try:
        while data := await reader.read(PIECE):
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((loop.time() + delay, b""))
    try:
        await sender
    except (ConnectionError, OSError):
        pass


async def _serve(listen: socket.socket, target: int, delay: float, stop: asyncio.Event) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, server_w, delay), _pipe(server_r, client_w, delay))
        for w in (client_w, server_w):
            w.close()

    server = await asyncio.start_server(handle, sock=listen)
    async with server:
        await stop.wait()


@contextmanager
def delay_proxy(target_port: int, rtt_s: float = 0.1) -> Iterator[DelayProxy]:
    """A proxy on 127.0.0.1 in front of ``target_port``, adding ``rtt_s`` per round trip."""
    listen = socket.socket()
    listen.bind(("127.0.0.1", 0))
    listen.listen(128)
    port = listen.getsockname()[1]
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(
        target=loop.run_until_complete,
        args=(_serve(listen, target_port, rtt_s / 2, stop),),
        daemon=True,
    )
    thread.start()
    try:
        yield DelayProxy(port, rtt_s)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        listen.close()
