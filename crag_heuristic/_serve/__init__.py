"""The gate as an HTTP service (the ``serve`` extra: Starlette and uvicorn).

``settings.py`` (ServeSettings: limits and keys), ``requests.py`` (request bodies
read and checked), ``app.py`` (create_app: the routes, admission, errors, access
events), ``metrics.py`` (the service's Prometheus metrics), ``server.py`` (serve:
uvicorn on a loopback or keyed address, graceful shutdown; serving: one in a
thread); public face: ``crag_heuristic.serve``.
"""
