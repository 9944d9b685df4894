"""Feed agy streams to blobhub-worker's own translator and print what it makes.

Reads {"cases": [{"name", "lines", "mode", "gate_calls"}]} on stdin; for each case walks the lines as the
worker's Antigravity session does (a result event is kept aside, a line that is not JSON is skipped,
every other event goes through StreamTranslator, whose messages become thread items through the worker's
translate_message), then closes the turn with to_result. Prints one JSON object per case.
"""

import json
import sys

from blobhub_worker.codeagents.adapters._antigravity_stream import StreamTranslator, to_result
from blobhub_worker.thread_agent.translate import translate_message


def run(case):
    translator = StreamTranslator()
    items, payload, tool_calls, denials, had_result = [], {}, 0, 0, False

    def take(messages):
        nonlocal tool_calls, denials
        for msg in messages:
            if msg.type == "tool_use":
                tool_calls += 1
            if msg.type == "error" and "denied by pre-tool hook" in msg.content.lower():
                denials += 1
            item = translate_message(msg)
            if item is not None:
                items.append(item)

    for raw in case["lines"]:
        line = raw.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "result":
            payload, had_result = event.get("result") or {}, True
            continue
        take(translator.feed(event))
    take(translator.flush())
    result = to_result(payload, duration_ms=0, gate_calls=case["gate_calls"], mode=case["mode"],
                       tool_calls=tool_calls, gate_denials=denials)
    usage = result.usage["total"]
    return {"name": case["name"], "items": items, "status": result.status, "error": result.error,
            "had_result": had_result,
            "usage": {"input": usage.input_tokens, "output": usage.output_tokens, "cache_read": usage.cache_read_tokens}}


def main():
    cases = json.load(sys.stdin)["cases"]
    for case in cases:
        sys.stdout.write(json.dumps(run(case)) + "\n")


main()
