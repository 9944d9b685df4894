"""Loads state files through blobhub-worker's own models.

read THREAD NOT_MINE: validate thread.yaml as ThreadState and not_mine.yaml as
NotMineState, as the worker's statestore.read_model does, and print what the
worker reads, as JSON.
write THREAD: write a thread.yaml as the worker writes one (statestore.write_model)
with a park, a grant, usage totals, the session's fields and last_event.
jobid SESSION PREFIX...: print, as a JSON list, the job folder the worker names for a
section of SESSION with each prefix (section_runner.identity.job_id).
"""

import json
import sys
from pathlib import Path

from blobhub_worker import statestore
from blobhub_worker.models.disk import (AgentState, GrantState, ItemRef, ItemsState, NotMineState,
                                        ParkState, SessionRef, ThreadState, WorkspaceState)

if sys.argv[1] == "jobid":
    from blobhub_worker.models.disk import SectionConfig
    from blobhub_worker.section_runner.identity import job_id
    print(json.dumps([job_id(SectionConfig(job_type="session_agent_harness", session=SessionRef(
        session_id=sys.argv[2], session_prefix=prefix)), sys.argv[2]) for prefix in sys.argv[3:]]))
elif sys.argv[1] == "read":
    thread = statestore.read_model(Path(sys.argv[2]), ThreadState)
    not_mine = statestore.read_model(Path(sys.argv[3]), NotMineState)
    print(json.dumps({"thread": thread.model_dump(), "not_mine": not_mine.model_dump()}))
else:
    state = ThreadState(
        alias="jobs/daemon", last_event="parked on Bash",
        session=SessionRef(org_id="org-1", blob_id="blob-1", revision_id="rev-1", session_id="ses-1",
                           session_prefix="jobs/"),
        workspace=WorkspaceState(agent_type="claude_code", work_folder="/srv/work"),
        agent=AgentState(state="active", agent_session_id="sess-daemon",
                         park=ParkState(prompt_id="prm_01DAEMON", kind="approval", subject="Bash"),
                         grant=GrantState(subject="Bash", verdict="approve", granted_by="prm_01EARLIER",
                                          grant_key="Bash:make test"),
                         usage_total={"input_tokens": 1200, "output_tokens": 80}),
        items=ItemsState(last_consumed=ItemRef(item_id="itm-1", created_at="2026-05-27T12:35:01.123456Z")),
    )
    statestore.write_model(Path(sys.argv[2]), state)
