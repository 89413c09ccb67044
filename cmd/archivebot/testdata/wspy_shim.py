# Runs upstream's dashboard/websocket.py, written against the private API
# of websockets 7, on Debian's python3-websockets 10.4, for the stream load
# comparison (TestStreamLoad with ARCHIVEBOT_STREAM_LOAD_WSPY). Only the
# private names it uses are provided here; its own code runs unchanged and
# is never part of this repository (fetch it yourself).
#
#   /usr/bin/python3 wspy_shim.py PATH/TO/websocket.py PORT
import runpy
import sys
import types

import websockets
import websockets.frames
import websockets.legacy.protocol

framing = types.ModuleType("websockets.framing")
framing.OP_TEXT = websockets.frames.Opcode.TEXT


class Frame:
    def __init__(self, fin, opcode, data):
        self._frame = websockets.frames.Frame(opcode, data, fin)

    def write(self, write, mask, extensions):
        write(self._frame.serialize(mask=mask, extensions=extensions))


framing.Frame = Frame
sys.modules["websockets.framing"] = framing
websockets.framing = framing


class _Writer:
    def __init__(self, ws):
        self._ws = ws

    def write(self, data):
        self._ws.transport.write(data)

    @property
    def transport(self):
        return self._ws.transport

    async def drain(self):
        await self._ws._drain()


Protocol = websockets.legacy.protocol.WebSocketCommonProtocol
Protocol.writer = property(_Writer)
Protocol.writer_is_closing = lambda self: self.transport.is_closing()

_port = int(sys.argv[2])
_serve = websockets.serve
websockets.serve = lambda handler, host, port, **kw: _serve(handler, "127.0.0.1", _port, **kw)
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
