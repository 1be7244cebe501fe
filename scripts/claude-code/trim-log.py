#!/usr/bin/env python3
"""Turn stub.py request-log lines into small, redacted fixture files.

    trim-log.py LOG.jsonl N OUT.json [--keep SUBSTRING ...] [--max 400]

Takes the N-th line (1-based) of a stub request log and writes it pretty-printed with:
- every string longer than --max characters cut to --max, with " [... N chars omitted]",
  unless it contains one of the --keep substrings (then a window around each is kept);
- tools reduced to {name, description (cut)}; input schemas dropped;
- metadata.user_id (device id) and the x-api-key header redacted (the stub already redacts keys);
- the temporary paths left as they are (they name the test's temp HOME, not a person).
"""
import argparse
import json
import re


def cut(s, limit, keep):
    if len(s) <= limit:
        return s
    for k in keep:
        i = s.find(k)
        if i >= 0:
            lo, hi = max(0, i - limit // 2), min(len(s), i + len(k) + limit // 2)
            pre = "[... %d chars omitted] " % lo if lo else ""
            post = " [... %d chars omitted]" % (len(s) - hi) if hi < len(s) else ""
            return pre + s[lo:hi] + post
    return s[:limit] + " [... %d chars omitted]" % (len(s) - limit)


def walk(o, limit, keep):
    if isinstance(o, str):
        return cut(o, limit, keep)
    if isinstance(o, list):
        return [walk(v, limit, keep) for v in o]
    if isinstance(o, dict):
        return {k: walk(v, limit, keep) for k, v in o.items()}
    return o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--keep", action="append", default=[])
    ap.add_argument("--max", type=int, default=400)
    a = ap.parse_args()
    with open(a.log, encoding="utf-8") as f:
        rec = json.loads(f.read().splitlines()[a.n - 1])
    body = rec.get("body")
    if isinstance(body, dict):
        if isinstance(body.get("tools"), list):
            body["tools"] = [{"name": t.get("name"),
                              "description": cut(t.get("description") or "", 200, [])}
                             for t in body["tools"]]
        md = body.get("metadata")
        if isinstance(md, dict) and "user_id" in md:
            md["user_id"] = re.sub(r'"device_id":"[0-9a-f]+"', '"device_id":"<redacted>"',
                                   md["user_id"])
    hdr = rec.get("headers") or {}
    for k in list(hdr):
        if k in ("x-api-key", "authorization"):
            hdr[k] = "<redacted>"
    rec = walk(rec, a.max, a.keep)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
