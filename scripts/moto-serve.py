"""moto's S3 server with its writes made atomic, as S3's are.

moto's PutObject checks If-None-Match (and If-Match) and then stores the
object in two steps, and its server answers each request on its own
thread, so two conditional puts of one key can both succeed (seen in
storetest's PutIfAbsentRace). S3 decides a conditional write atomically.
This launcher runs the same application as moto_server, with one lock
held around every request that writes (PUT, POST, DELETE); reads stay
concurrent.

Usage: python moto-serve.py HOST PORT
"""

import sys
import threading

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)

WRITES = {"PUT", "POST", "DELETE"}


class SerializedWrites:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") not in WRITES:
            return self.app(environ, start_response)
        with self.lock:
            # The body is produced inside the lock: the write happens
            # while the application builds its answer.
            return list(self.app(environ, start_response))


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    run_simple(host, port, SerializedWrites(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
