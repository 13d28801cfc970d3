"""TEST DOUBLE of an interpreter: writes the argv and selected environment it was given as JSON to
``$ARGV_DUMP_FILE`` and exits 0. Lets a test check what a generated script really passes.

With ``ARGV_DUMP_APPEND=1`` every call appends one JSON line instead (a script that runs the
interpreter several times, like run_measure.sh)."""
import json
import os
import sys

names = os.environ.get("ARGV_DUMP_ENV", "").split(",")
record = {"argv": sys.argv[1:], "env": {n: os.environ.get(n) for n in names if n}}
if os.environ.get("ARGV_DUMP_APPEND") == "1":
    with open(os.environ["ARGV_DUMP_FILE"], "a") as f:
        f.write(json.dumps(record) + "\n")
else:
    with open(os.environ["ARGV_DUMP_FILE"], "w") as f:
        json.dump(record, f)
