"""`turnlog web`: a read-only local web viewer of a gateway's log (issue 15).

turnlog.web.app.create_app(path) builds the Starlette app; `turnlog web` serves it with uvicorn.
Nothing here is imported by `turnlog` itself, so the base install works without the `web` extra.
"""
