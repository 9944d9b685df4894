"""Judge (policy, call) pairs with blobhub-worker's own policy code.

Reads one JSON object per line on stdin and writes one per line on stdout,
in the same order. A pair is {posture, owner: [rules], policy: {...} | null,
work_folder, outbox, call: {effect, command, path}}; the answer is
{action, rule, origin}, or {error} when the worker refuses the policy.
A line {load_config: "<yaml>"} or {load_policy: {...}} instead loads a
config or a policy through the worker's models and validation and answers
{ok: true} or {error}; {fnmatch: [pattern, name]} answers {ok} or {error},
{segments: command} answers {read: the effective commands}.
"""

import fnmatch
import json
import sys

import yaml
from pydantic import ValidationError

from blobhub_worker.config.validate import validate_config
from blobhub_worker.models.disk import Config
from blobhub_worker.policy.effects import ToolCall
from blobhub_worker.policy import segments
from blobhub_worker.policy.evaluator import PolicyEvaluator
from blobhub_worker.policy.models import Policy, PolicyRule
from blobhub_worker.thread_agent.states import validate_policy


def judge(case):
    posture = case.get("posture", "guarded")
    if posture == "autonomous":
        return {"action": "allow", "rule": "", "origin": "posture"}
    if posture == "approval":
        # No gate: every call goes to the person.
        return {"action": "ask", "rule": "", "origin": "posture"}
    try:
        owner = [PolicyRule.model_validate(r) for r in case.get("owner") or []]
        block = case.get("policy")
        policy = Policy.model_validate(block) if block else None
    except ValidationError as exc:
        return {"error": f"POLICY_INVALID: {exc}"}
    if policy is None:
        return {"error": "POLICY_MISSING"}
    err = validate_policy(policy)
    if err is not None:
        return {"error": err[0] + ": " + err[1]}
    ev = PolicyEvaluator(owner, policy, case["work_folder"], outbox=case.get("outbox", ""))
    call = case["call"]
    try:
        d = ev.decide(ToolCall(effect=call.get("effect", ""), path=call.get("path", ""),
                               command=call.get("command", "")))
    except Exception:  # the worker's gate fails closed
        return {"action": "deny", "rule": "policy_evaluation_error", "origin": "error"}
    return {"action": d.action, "rule": d.rule_id, "origin": d.origin}


def load(case):
    try:
        if "load_config" in case:
            doc = yaml.safe_load(case["load_config"]) or {}
            validate_config(Config.model_validate(doc))
        else:
            block = case["load_policy"]
            policy = Policy.model_validate(block) if block else None
            if policy is None:
                return {"error": "POLICY_MISSING"}
            err = validate_policy(policy)
            if err is not None:
                return {"error": err[0] + ": " + err[1]}
            # What the worker would do with each rule: its shape, as read.
            return {"ok": True, "read": policy.model_dump()}
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True}


def main():
    out = sys.stdout
    for line in sys.stdin:
        case = json.loads(line)
        if "fnmatch" in case:
            try:
                answer = {"ok": fnmatch.fnmatchcase(case["fnmatch"][1], case["fnmatch"][0])}
            except Exception as exc:  # noqa: BLE001 - the worker's gate denies
                answer = {"error": f"{type(exc).__name__}: {exc}"}
        elif "leaves" in case:
            # The worker's own test of a path against a root (its outside).
            ev = PolicyEvaluator([], None, case["work_folder"], outbox=case.get("outbox", ""))
            root = ev._outbox if case.get("root") == "outbox" else ev._work_folder
            answer = {"ok": ev._leaves(root, case["leaves"])}
        elif "segments" in case:
            answer = {"read": segments.effective_commands(case["segments"])}
        elif "load_config" in case or "load_policy" in case:
            answer = load(case)
        else:
            answer = judge(case)
        out.write(json.dumps(answer) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
