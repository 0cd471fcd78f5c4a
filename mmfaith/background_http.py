"""An HTTP server run in a background thread: start, stop, or serve in the calling thread until Ctrl-C."""
from __future__ import annotations

import functools
import threading
from socketserver import BaseServer

POLL_S = 0.05
"""How often the serving thread looks for a stop: `stop` waits up to this long (socketserver's default, 0.5 s,
made each of the quickstart's ten in-process servers cost half a second to stop)."""


class BackgroundHTTP:
    """Owns `self._httpd` (set by the subclass before use) and the thread that serves it."""

    _httpd: BaseServer
    _thread: threading.Thread | None = None
    thread_name = "http-server"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self):  # -> Self
        self._thread = threading.Thread(target=functools.partial(self._httpd.serve_forever, poll_interval=POLL_S),
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self):  # -> Self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C, then close the socket."""
        try:
            self._httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._httpd.server_close()
