"""`turnlog web`: a read-only local web viewer of a gateway's log (issue 15).

create_app(path) builds the Starlette app; `turnlog web` serves it with uvicorn.
"""

from .app import create_app

__all__ = ["create_app"]
