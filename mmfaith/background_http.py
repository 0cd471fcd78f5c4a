"""An HTTP server run in a background thread: start, stop, or serve in the calling thread until Ctrl-C."""
from __future__ import annotations

import threading
from socketserver import BaseServer


class BackgroundHTTP:
    """Owns `self._httpd` (set by the subclass before use) and the thread that serves it."""

    _httpd: BaseServer
    _thread: threading.Thread | None = None
    thread_name = "http-server"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self):  # -> Self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True)
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
