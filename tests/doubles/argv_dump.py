"""TEST DOUBLE of an interpreter: writes the argv and selected environment it was given as JSON to
``$ARGV_DUMP_FILE`` and exits 0. Lets a test check what a generated script really passes."""
import json
import os
import sys

names = os.environ.get("ARGV_DUMP_ENV", "").split(",")
with open(os.environ["ARGV_DUMP_FILE"], "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {n: os.environ.get(n) for n in names if n}}, f)
