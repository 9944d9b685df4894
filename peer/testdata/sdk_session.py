"""Drive the BlobHub Python SDK against a BlobHub API, one step per run.

Used by the peer conformance tests (peer/peer_test.go): the SDK is the
client the service's own authors ship, so what it sends and accepts is the
API's shape. Arguments: the step (write or read), then the thread alias.
The API, key, blob, revision and session come from the environment. The
step prints one JSON object on stdout: what the SDK sent and read back.
"""

import json
import os
import sys

import blobhub


def revision():
    client = blobhub.connect(api_key=os.environ["BLOBHUB_API_KEY"], api_url=os.environ["BLOBHUB_API_URL"])
    rev = client.blob(os.environ["PEER_ORG_ID"], os.environ["PEER_BLOB_ID"]).revision(os.environ["PEER_REVISION_ID"])
    return client, rev


def session_id(rev):
    # get_session takes the alias as well as the id; the data commands want the id.
    return rev.query("get_session", session_id=os.environ["PEER_SESSION"])["session"]["id"]


def write(alias):
    client, rev = revision()
    ses = session_id(rev)
    value = {"type": "thread", "thread": {"attributes": {"name": alias},
                                          "metadata": {"instance": {"state": "pending"}}}}
    rev.command("upload_session_object", session_id=ses, alias=alias, value=value)
    posted = rev.command("post_session_thread_item", session_id=ses, alias=alias,
                         content=[{"type": "text", "text": "written by the SDK"}],
                         metadata={"type": "text"})["item"]
    return {"user": client.whoami(), "session_id": ses, "value": value, "item": posted}


def read(alias):
    _, rev = revision()
    ses = session_id(rev)
    items, cursor, pages = [], None, 0
    while True:
        page = rev.query("list_session_thread_items", session_id=ses, alias=alias, ascending=True,
                         limit=1, cursor=cursor)
        items.extend(page["items"])
        pages += 1
        cursor = page.get("cursor")
        if not cursor:
            break
    obj = rev.query("download_session_object", session_id=ses, alias=alias)["object"]
    listed = rev.query("list_session_objects", session_id=ses, prefix=alias.split("/")[0])["objects"]
    rev.command("delete_session_object", session_id=ses, alias=alias)
    try:
        rev.query("download_session_object", session_id=ses, alias=alias)
        after = "found"
    except blobhub.BlobHubError as error:
        after = {"class": type(error).__name__, "status": error.status, "error": error.error}
    return {"items": items, "pages": pages, "object": obj, "listed": [o["alias"] for o in listed],
            "after_delete": after}


def events(alias):
    # The session's feed, oldest first, two a page, as the daemon follows it.
    _, rev = revision()
    ses = session_id(rev)
    out, cursor, pages = [], None, 0
    while True:
        args = {"session_id": ses, "ascending": True, "limit": 2}
        if cursor:
            args["cursor"] = cursor
        page = rev.query("list_session_events", **args)
        out.extend(e for e in page["session_events"] if (e.get("session_object") or {}).get("alias") == alias)
        pages += 1
        cursor = page.get("cursor")
        if not cursor:
            break
    return {"events": out, "pages": pages}


def main():
    step, alias = sys.argv[1], sys.argv[2]
    out = {"write": write, "read": read, "events": events}[step](alias)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
