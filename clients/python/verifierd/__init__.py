"""Client for the verifierd daemon's HTTP/JSON API (standard library only).

    from verifierd import Client
    client = Client("http://127.0.0.1:7444")
    with client.step(deployment="clinic", workflow="triage", step="save_triage",
                     params={"patient_id": "p1", "note": "Follow-up"}):
        save_triage_note()  # the consequential action; NotConfirmed unless VERIFIED
"""

from . import client as _client
from .client import *  # noqa: F401,F403  (the names in client.__all__)

__all__ = list(_client.__all__)
