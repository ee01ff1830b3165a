"""The good test handler, having started a child that would outlive it if only it were
stopped: `forewarn verify` must stop the handler's whole process group. The child's pid goes
to the file named by ``SPAWNED_PID_FILE``."""

import os
import subprocess

from _loop import main

child = subprocess.Popen(["sleep", "300"])
with open(os.environ["SPAWNED_PID_FILE"], "w") as out:
    out.write(str(child.pid))
main(None)
