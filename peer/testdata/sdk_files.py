"""Session files through blobhub-worker's own client (its upload_session_file
and download_session_file), against a BlobHub API.

Used by the peer conformance tests: `download ALIAS...` prints, per alias,
the file's sha256, size and what its object says of it; `upload ALIAS PATH
NAME CONTENT_TYPE` uploads a file's bytes and prints the object's value.
The API, key, revision and session come from the environment.
"""

import asyncio
import hashlib
import json
import os
import sys

from blobhub_worker.blobhub_client.client import BlobhubClient


async def main(argv):
    client = BlobhubClient(os.environ["BLOBHUB_API_KEY"], base_url=os.environ["BLOBHUB_API_URL"])
    rev, ses = os.environ["PEER_REVISION_ID"], os.environ["PEER_SESSION_ID"]
    out = {}
    if argv[0] == "download":
        for alias in argv[1:]:
            obj, data = await client.download_session_file(rev, ses, alias)
            out[alias] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                          "file": (obj.get("value") or {}).get("file")}
    elif argv[0] == "upload":
        alias, path, name, ctype = argv[1:5]
        with open(path, "rb") as f:
            data = f.read()
        obj = await client.upload_session_file(rev, ses, alias, data, name=name, content_type=ctype)
        out = obj.get("value") or {}
    print(json.dumps(out))


asyncio.run(main(sys.argv[1:]))
