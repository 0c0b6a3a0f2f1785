"""A server on 127.0.0.1 for the tests of a fetch (tests/test_tu_fetch.py, tests/test_text_senteval_fetch.py): it serves
given bytes by name, honours a Range request, counts the requests and may cut its first answer short."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator


class Served:
    """What the test server serves, how often it was asked, and where it cuts the first answer short."""

    def __init__(self, files: dict[str, bytes], cut_after: int | None = None) -> None:
        self.files, self.cut_after, self.requests, self.ranges = files, cut_after, 0, []


@contextlib.contextmanager
def serve(served: Served) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            served.requests += 1
            body = served.files.get(self.path.lstrip("/"))
            if body is None:
                self.send_error(404)
                return
            start = 0
            if (wanted := self.headers.get("Range")) is not None:
                served.ranges.append(wanted)
                start = int(wanted.removeprefix("bytes=").split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            if served.cut_after is not None:
                self.wfile.write(body[start : served.cut_after])
                served.cut_after = None
                self.close_connection = True
                return
            self.wfile.write(body[start:])

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
