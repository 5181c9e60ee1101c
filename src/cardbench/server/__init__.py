"""The station server (``cardbench serve``): a lab's stations and their results in one place.

``tokens``: who may write (station tokens, stored hashed); ``app``: the Starlette application
(pages, the versioned JSON API, the live page's event stream); ``pages``: the HTML, drawn with the
report's own pieces (report/html.py, report/svg.py). Served by uvicorn (cli/serve_cmd.py).
"""
