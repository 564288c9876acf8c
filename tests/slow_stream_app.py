"""A WSGI app that streams a response slowly, for tests/test_gunicorn_streaming.py."""

import time


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])

    def chunks():
        for index in range(6):
            time.sleep(1)
            yield f"chunk {index}\n".encode()

    return chunks()
